package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// UnschedulableError is returned (as *UnschedulableError) when the binding
// cannot be placed. Reason is one of:
//
//   - "NoClusterFit" (v1alpha1.ReasonNoClusterFit): no cluster fits. Error()
//     reads like Kubernetes: "0/3 clusters are available: 1 cluster(s) had
//     untolerated taint {cluster.flotilla.io/unreachable: }, 2 cluster(s)
//     did not match the placement's cluster affinity." FilterReasons says
//     why each cluster was left out.
//   - "Unschedulable" (v1alpha1.ReasonUnschedulable): clusters fit, but
//     they lack room for the replicas of a dynamic-weight or Aggregated
//     division: "0/3 clusters have room: need 10 replicas, 4 available
//     (member1: 3, member2: 1, member3: 0)". Room lists every selected
//     cluster's room as counted. The caller keeps the previous result.
type UnschedulableError struct {
	Reason  string
	Message string
	// FilterReasons maps cluster name -> why it was filtered out.
	FilterReasons map[string]string
	// Room maps each selected cluster to the replicas it has room for
	// (Unschedulable only): its available replicas, plus in Fresh mode
	// those it has now.
	Room map[string]int64
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

// maxRoomListed is how many clusters a capacity message lists by name.
const maxRoomListed = 10

// newCapacityError reports that slots have room for fewer than need of
// replicas (need < replicas when some are kept in place).
func newCapacityError(replicas, need int64, slots []slot, room func(*slot) int64) *UnschedulableError {
	rooms := make(map[string]int64, len(slots))
	var total int64
	var list strings.Builder
	for i := range slots {
		s := &slots[i]
		r := room(s)
		rooms[s.name] = r
		total = addSat(total, r)
		switch {
		case i < maxRoomListed:
			if i > 0 {
				list.WriteString(", ")
			}
			fmt.Fprintf(&list, "%s: %d", s.name, r)
		case i == maxRoomListed:
			fmt.Fprintf(&list, " and %d more", len(slots)-maxRoomListed)
		}
	}
	more := ""
	if need < replicas {
		more = " more"
	}
	return &UnschedulableError{
		Reason: v1alpha1.ReasonUnschedulable,
		Message: fmt.Sprintf("0/%d clusters have room: need %d%s replicas, %d available (%s)",
			len(slots), need, more, total, list.String()),
		Room: rooms,
	}
}
