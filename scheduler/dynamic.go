package scheduler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// slot is one selected cluster as dynamic and Aggregated division see it.
type slot struct {
	name   string
	prev   int64 // replicas it has now (Input.Previous)
	listed bool  // in Input.Previous, even with 0 (Karmada's locality score)
	avail  int64 // AvailableReplicas: room for more
	seats  int64 // the result
}

// capacityRequest is what divideByCapacity needs beyond the clusters.
type capacityRequest struct {
	replicas int64
	previous []v1alpha1.TargetCluster
	room     *roomCache
	fresh    bool
	ties     ties
}

// divideByCapacity divides replicas (> 0) among clusters (sorted by name)
// for dynamic weights (aggregated false) and Aggregated division; see the
// package documentation for the rules.
func divideByCapacity(r capacityRequest, aggregated bool, clusters []*v1alpha1.Cluster) ([]v1alpha1.TargetCluster, error) {
	prev := make(map[string]int64, len(r.previous))
	for _, t := range r.previous {
		prev[t.Name] += int64(max(t.Replicas, 0))
	}
	slots := make([]slot, len(clusters))
	var kept int64 // replicas on clusters still selected
	for i, c := range clusters {
		p, listed := prev[c.Name]
		slots[i] = slot{name: c.Name, prev: p, listed: listed, avail: r.room.of(c)}
		kept += p
	}

	switch {
	case r.fresh:
		if err := fresh(r.replicas, slots, aggregated, r.ties); err != nil {
			return nil, err
		}
	case kept == r.replicas:
		for i := range slots {
			slots[i].seats = slots[i].prev
		}
	case kept > r.replicas:
		scaleDown(r.replicas, slots, aggregated, r.ties)
	default:
		if err := scaleUp(r.replicas, kept, slots, aggregated, r.ties); err != nil {
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
func scaleUp(replicas, kept int64, slots []slot, aggregated bool, t ties) error {
	need := replicas - kept
	if total(slots, free) < need {
		return newCapacityError(replicas, need, slots, free)
	}
	for i, p := range share(need, slots, free, fewestBy(aggregated, rankScaleUp), t) {
		slots[i].seats = slots[i].prev + p.seats
	}
	return nil
}

// scaleDown shrinks by the current assignment; removing needs no room.
// Aggregated also gives up the clusters with the fewest replicas.
func scaleDown(replicas int64, slots []slot, aggregated bool, t ties) {
	for i, p := range share(replicas, slots, previous, fewestBy(aggregated, rankScaleDown), t) {
		slots[i].seats = p.seats
	}
}

// fresh divides replicas from scratch by capacity (room plus the replicas
// a cluster has now), as if the binding were scheduled for the first time.
func fresh(replicas int64, slots []slot, aggregated bool, t ties) error {
	if total(slots, capacity) < replicas {
		return newCapacityError(replicas, replicas, slots, capacity)
	}
	for i, p := range share(replicas, slots, capacity, fewestBy(aggregated, rankFresh), t) {
		slots[i].seats = p.seats
	}
	return nil
}

func free(s *slot) int64     { return s.avail }
func previous(s *slot) int64 { return s.prev }
func capacity(s *slot) int64 { return addSat(s.avail, s.prev) }

// used and listed are 1 or 0, for ranking.
func used(s *slot) int {
	if s.prev > 0 {
		return 1
	}
	return 0
}

func listed(s *slot) int {
	if s.listed {
		return 1
	}
	return 0
}

func total(slots []slot, weight func(*slot) int64) int64 {
	var sum int64
	for i := range slots {
		sum = addSat(sum, weight(&slots[i]))
	}
	return sum
}

// share apportions seats among slots in proportion to weight (at most
// their total), ties going as t says, and returns the parties, in slot
// order. With a rank (Aggregated), only the first slots in rank order whose
// weights cover the seats take part: Karmada cuts its sorted list the same
// way.
func share(seats int64, slots []slot, weight func(*slot) int64, rank func(a, b *slot) int, t ties) []party {
	parties, caps := make([]party, len(slots)), make([]int64, len(slots))
	for i := range slots {
		caps[i] = weight(&slots[i])
		parties[i] = party{name: slots[i].name, weight: caps[i]}
	}
	if rank != nil {
		keepFewest(seats, slots, parties, rank)
	}
	apportionCapped(seats, parties, caps, t)
	return parties
}

// keepFewest sets the weight of every party to 0 except the first, in
// rank order, whose weights add up to seats.
func keepFewest(seats int64, slots []slot, parties []party, rank func(a, b *slot) int) {
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return rank(&slots[a], &slots[b]) })
	var sum int64
	for k, i := range order {
		if sum >= seats {
			for _, j := range order[k:] {
				parties[j].weight = 0
			}
			return
		}
		sum = addSat(sum, parties[i].weight)
	}
}

// fewestBy is the rank share takes the fewest clusters by: for
// Aggregated rank, otherwise none (every cluster takes part).
func fewestBy(aggregated bool, rank func(a, b *slot) int) func(a, b *slot) int {
	if aggregated {
		return rank
	}
	return nil
}

// The ranks are Karmada's: it sorts by the weight, most first, with a
// sort that keeps equal clusters in candidate order (those in the
// previous result, then most capacity, then name).

// rankScaleUp puts the clusters with replicas first (Karmada's
// resortAvailableClusters), each part by most room.
func rankScaleUp(a, b *slot) int {
	return cmp.Or(-cmp.Compare(used(a), used(b)), -cmp.Compare(a.avail, b.avail),
		-cmp.Compare(listed(a), listed(b)), -cmp.Compare(capacity(a), capacity(b)), strings.Compare(a.name, b.name))
}

// rankFresh ranks by capacity: a Fresh schedule is like a first one.
func rankFresh(a, b *slot) int {
	return cmp.Or(-cmp.Compare(capacity(a), capacity(b)), -cmp.Compare(listed(a), listed(b)), strings.Compare(a.name, b.name))
}

// rankScaleDown keeps the clusters with the most replicas. Karmada ranks
// equals in the previous result's order, which is ours sorted by name.
func rankScaleDown(a, b *slot) int {
	return cmp.Or(-cmp.Compare(a.prev, b.prev), strings.Compare(a.name, b.name))
}

// apportionCapped sets the seats of parties to a Webster apportionment of
// seats (ties going as t says) in which no party gets more than its cap
// (caps[i] for parties[i]):
// a party given more is capped and the rest re-apportioned among the
// others, until none is over. The caps must add up to at least seats, or
// some seats are left out.
//
// Schedule's callers pass caps equal to the weights, and then Webster never
// goes over when seats ≤ the total weight: a party at its cap w has
// quotient w/(2w+1) < 1/2, while some party j below its cap has
// w_j/(2s_j+1) ≥ w_j/(2w_j−1) > 1/2 and takes the seat first. The loop is
// a guarantee that does not rest on that argument.
func apportionCapped(seats int64, parties []party, caps []int64, t ties) {
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
		apportion(seats, work, t)
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
