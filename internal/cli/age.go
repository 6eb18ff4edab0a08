package cli

import (
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// unknownAge is printed for a time the object does not carry.
const unknownAge = "<unknown>"

// age prints how long before now t was, the way kubectl prints ages ("45s",
// "3m20s", "5h", "12d"). A time a little ahead of now (the hub's clock runs
// ahead of this machine's) prints as "0s" rather than "<invalid>".
func age(now, t time.Time) string {
	if t.IsZero() {
		return unknownAge
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// seconds prints a duration given in whole seconds ("40s", "5m"), or "-"
// when it is unset.
func seconds(s *int32) string {
	if s == nil {
		return none
	}
	return duration.HumanDuration(time.Duration(*s) * time.Second)
}
