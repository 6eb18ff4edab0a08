package scheduler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// slot is one selected cluster as dynamic and Aggregated division see it.
type slot struct {
	name  string
	prev  int64 // replicas it has now (Input.Previous)
	avail int64 // AvailableReplicas: room for more
	seats int64 // the result
}

// capacityRequest is what divideByCapacity needs beyond the clusters.
type capacityRequest struct {
	replicas int64
	previous []v1alpha1.TargetCluster
	room     *roomCache
	fresh    bool
}

// divideByCapacity divides replicas (> 0) among clusters (sorted by name)
// for dynamic weights (aggregated false) and Aggregated division; see the
// package documentation for the rules.
func divideByCapacity(r capacityRequest, aggregated bool, clusters []*v1alpha1.Cluster) ([]v1alpha1.TargetCluster, error) {
	prev := make(map[string]int64, len(r.previous))
	for _, t := range r.previous {
		if t.Replicas > 0 {
			prev[t.Name] += int64(t.Replicas)
		}
	}
	slots := make([]slot, len(clusters))
	var kept int64 // replicas on clusters still selected
	for i, c := range clusters {
		slots[i] = slot{name: c.Name, prev: prev[c.Name], avail: r.room.of(c)}
		kept += slots[i].prev
	}

	switch {
	case r.fresh:
		if err := fresh(r.replicas, slots, aggregated); err != nil {
			return nil, err
		}
	case kept == r.replicas:
		for i := range slots {
			slots[i].seats = slots[i].prev
		}
	case kept > r.replicas:
		// Scale down by the current assignment; removing needs no room.
		parties, caps := make([]party, len(slots)), make([]int64, len(slots))
		for i, s := range slots {
			parties[i], caps[i] = party{name: s.name, weight: s.prev}, s.prev
		}
		apportionCapped(r.replicas, parties, caps)
		for i := range slots {
			slots[i].seats = parties[i].seats
		}
	default:
		if err := scaleUp(r.replicas, kept, slots, aggregated); err != nil {
			return nil, err
		}
	}

	targets := make([]v1alpha1.TargetCluster, 0, len(slots))
	for _, s := range slots {
		if s.seats > 0 {
			targets = append(targets, v1alpha1.TargetCluster{Name: s.name, Replicas: int32(s.seats)})
		}
	}
	return targets, nil
}

// scaleUp keeps every cluster's previous replicas and places the
// replicas−kept new ones by free room.
func scaleUp(replicas, kept int64, slots []slot, aggregated bool) error {
	need := replicas - kept
	var room int64
	for _, s := range slots {
		room = addSat(room, s.avail)
	}
	if room < need {
		return newCapacityError(replicas, need, slots, func(s *slot) int64 { return s.avail })
	}
	if aggregated {
		// Used clusters first, then as few new ones as fit: filling in
		// order of most room gives the fewest.
		order := make([]*slot, len(slots))
		for i := range slots {
			order[i] = &slots[i]
		}
		slices.SortFunc(order, func(a, b *slot) int {
			return cmp.Or(-cmp.Compare(min(a.prev, 1), min(b.prev, 1)), -cmp.Compare(a.avail, b.avail), strings.Compare(a.name, b.name))
		})
		for _, s := range order {
			add := min(need, s.avail)
			s.seats = s.prev + add
			need -= add
		}
		return nil
	}
	parties, caps := make([]party, len(slots)), make([]int64, len(slots))
	for i, s := range slots {
		parties[i], caps[i] = party{name: s.name, weight: s.avail}, s.avail
	}
	apportionCapped(need, parties, caps)
	for i := range slots {
		slots[i].seats = slots[i].prev + parties[i].seats
	}
	return nil
}

// fresh divides replicas from scratch, a cluster's capacity being its
// free room plus the replicas it has now.
func fresh(replicas int64, slots []slot, aggregated bool) error {
	capacity := func(s *slot) int64 { return addSat(s.avail, s.prev) }
	var room int64
	for i := range slots {
		room = addSat(room, capacity(&slots[i]))
	}
	if room < replicas {
		return newCapacityError(replicas, replicas, slots, capacity)
	}
	parties, caps := make([]party, len(slots)), make([]int64, len(slots))
	for i := range slots {
		caps[i] = capacity(&slots[i])
		parties[i] = party{name: slots[i].name, weight: caps[i]}
	}
	if aggregated {
		chosen := fewestClusters(replicas, slots, capacity)
		for i := range parties {
			if !chosen[i] {
				parties[i].weight = 0
			}
		}
	}
	apportionCapped(replicas, parties, caps)
	for i := range slots {
		slots[i].seats = parties[i].seats
	}
	return nil
}

// fewestClusters picks the smallest number k of slots whose capacities add
// up to replicas (at most their total) and, among the ways to pick k,
// the one with the most already-used clusters; within used and unused
// clusters it takes those with the most capacity, then the lower names.
// It returns which slots it picked.
func fewestClusters(replicas int64, slots []slot, capacity func(*slot) int64) []bool {
	byRoom := func(a, b int) int {
		return cmp.Or(-cmp.Compare(capacity(&slots[a]), capacity(&slots[b])), strings.Compare(slots[a].name, slots[b].name))
	}
	var all, used, unused []int
	for i := range slots {
		all = append(all, i)
		if slots[i].prev > 0 {
			used = append(used, i)
		} else {
			unused = append(unused, i)
		}
	}
	slices.SortFunc(all, byRoom)
	slices.SortFunc(used, byRoom)
	slices.SortFunc(unused, byRoom)
	k, sum := 0, int64(0)
	for sum < replicas {
		sum = addSat(sum, capacity(&slots[all[k]]))
		k++
	}
	// prefix[i] is the capacity of the first i of list.
	prefix := func(list []int) []int64 {
		p := make([]int64, len(list)+1)
		for i, s := range list {
			p[i+1] = addSat(p[i], capacity(&slots[s]))
		}
		return p
	}
	usedRoom, unusedRoom := prefix(used), prefix(unused)
	chosen := make([]bool, len(slots))
	// The used clusters among the k with the most room always fit, so
	// some j works.
	for j := min(k, len(used)); j >= 0; j-- {
		if k-j > len(unused) || addSat(usedRoom[j], unusedRoom[k-j]) < replicas {
			continue
		}
		for _, i := range used[:j] {
			chosen[i] = true
		}
		for _, i := range unused[:k-j] {
			chosen[i] = true
		}
		break
	}
	return chosen
}

// apportionCapped sets the seats of parties to a Webster apportionment of
// seats in which no party gets more than its cap (caps[i] for parties[i]):
// a party given more is capped and the rest re-apportioned among the
// others, until none is over. The caps must add up to at least seats, or
// some seats are left out.
//
// Schedule's callers pass caps equal to the weights, and then Webster never
// goes over when seats ≤ the total weight: a party at its cap w has
// quotient w/(2w+1) < 1/2, while some party j below its cap has
// w_j/(2s_j+1) ≥ w_j/(2w_j−1) > 1/2 and takes the seat first. The loop is
// a guarantee that does not rest on that argument.
func apportionCapped(seats int64, parties []party, caps []int64) {
	work := make([]party, 0, len(parties))
	idx := make([]int, 0, len(parties))
	for i := range parties {
		parties[i].seats = 0
		if parties[i].weight > 0 && caps[i] > 0 {
			work = append(work, parties[i])
			idx = append(idx, i)
		}
	}
	for seats > 0 && len(work) > 0 {
		apportion(seats, work)
		n, over := 0, false
		for k, p := range work {
			if c := caps[idx[k]]; p.seats > c {
				parties[idx[k]].seats = c
				seats -= c
				over = true
				continue
			}
			work[n], idx[n] = p, idx[k]
			n++
		}
		if !over {
			for k, p := range work {
				parties[idx[k]].seats = p.seats
			}
			return
		}
		work, idx = work[:n], idx[:n]
	}
}
