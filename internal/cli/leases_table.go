package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// leasesTable decodes the hub's answer (a LeaseList, or one Lease when
// single) into the "get leases" table.
func leasesTable(raw []byte, single, wide bool, now time.Time) (*table, error) {
	var items []coordinationv1.Lease
	if single {
		var l coordinationv1.Lease
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("decoding Lease: %w", err)
		}
		items = []coordinationv1.Lease{l}
	} else {
		var list coordinationv1.LeaseList
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("decoding LeaseList: %w", err)
		}
		items = list.Items
	}
	t := &table{header: []string{"NAME", "HOLDER", "RENEWED", "DURATION", "STATE"}}
	if wide {
		t.header = append(t.header, "ACQUIRED", "TRANSITIONS")
	}
	for i := range items {
		t.add(leaseRow(&items[i], wide, now)...)
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
