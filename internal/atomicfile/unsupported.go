package atomicfile

import (
	"errors"
	"syscall"
)

// isUnsupported: the file system cannot fsync a directory.
func isUnsupported(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)
}
