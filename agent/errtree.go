package agent

// inErrorTree reports whether err or any error it wraps, down every
// branch of joined errors (a race of dials joins one error per address),
// is a T that match accepts. errors.As would stop at the first T, so the
// verdict on a race's error would depend on which dial failed first.
func inErrorTree[T error](err error, match func(T) bool) bool {
	if err == nil {
		return false
	}
	if t, ok := err.(T); ok && match(t) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if inErrorTree(e, match) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return inErrorTree(u.Unwrap(), match)
	}
	return false
}

// anyOf accepts every error of its type.
func anyOf[T error](T) bool { return true }
