package cli

import (
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// leasesTable decodes the hub's answer (a LeaseList, or one Lease when
// single) into the "get leases" table.
func leasesTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[coordinationv1.Lease](raw, o.single, "Lease")
	if err != nil {
		return nil, err
	}
	t := &table{header: []string{"NAME", "HOLDER", "RENEWED", "DURATION", "STATE"}}
	if o.wide {
		t.header = append(t.header, "ACQUIRED", "TRANSITIONS")
	}
	for i := range items {
		t.add(leaseRow(&items[i], o.wide, o.now)...)
	}
	return t, nil
}

func leaseRow(l *coordinationv1.Lease, wide bool, now time.Time) []string {
	holder := none
	if l.Spec.HolderIdentity != nil {
		holder = orNone(*l.Spec.HolderIdentity)
	}
	row := []string{l.Name, holder, leaseRenewed(l, now), seconds(l.Spec.LeaseDurationSeconds), leaseState(l, now)}
	if !wide {
		return row
	}
	acquired := unknownAge
	if l.Spec.AcquireTime != nil {
		acquired = age(now, l.Spec.AcquireTime.Time)
	}
	return append(row, acquired, transitions(l))
}

// transitions is how often the lease changed holder.
func transitions(l *coordinationv1.Lease) string {
	if l.Spec.LeaseTransitions == nil {
		return "0"
	}
	return strconv.Itoa(int(*l.Spec.LeaseTransitions))
}
