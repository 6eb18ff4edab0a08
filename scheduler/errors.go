package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// UnschedulableError is returned (as *UnschedulableError) when no cluster
// fits; Reason is "NoClusterFit" (v1alpha1.ReasonNoClusterFit). Error()
// reads like Kubernetes:
// "0/3 clusters are available: 1 cluster(s) had untolerated taint {cluster.flotilla.io/unreachable: }, 2 cluster(s) did not match the placement's cluster affinity."
type UnschedulableError struct {
	Reason  string
	Message string
	// FilterReasons maps cluster name -> why it was filtered out.
	FilterReasons map[string]string
}

func (e *UnschedulableError) Error() string { return e.Message }

func newUnschedulableError(total int, reasons map[string]string) *UnschedulableError {
	return &UnschedulableError{
		Reason:        v1alpha1.ReasonNoClusterFit,
		Message:       unschedulableMessage(total, reasons),
		FilterReasons: reasons,
	}
}

// unschedulableMessage counts clusters per reason. Reasons are listed by
// count, then text, so equal input gives an equal message (the condition
// message is compared to decide whether the binding's status changed).
func unschedulableMessage(total int, reasons map[string]string) string {
	counts := map[string]int{}
	for _, r := range reasons {
		counts[r]++
	}
	order := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[a], counts[b]), strings.Compare(a, b))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d clusters are available", total)
	for i, r := range order {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%d cluster(s) %s", sep, counts[r], r)
	}
	b.WriteString(".")
	return b.String()
}
