package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Tier is how one tier of the clusterAffinities group used took part in
// a schedule (Result.Tiers): the group's own clusters are the primary
// tier, each of its overflowAffinities one more, in order.
type Tier struct {
	// Name is the group's affinityName for the primary tier, the overflow
	// affinity's for the others.
	Name string
	// Clusters are the selected clusters of the tier (that fit and, with
	// spread constraints, were chosen), sorted by name. A cluster that
	// several tiers match is in the first of them only.
	Clusters []string
	// Capacity is how many of the binding's replicas the tier's clusters
	// hold: the room each has for more, plus the replicas it has now.
	Capacity int64
	// Replicas are the replicas placed on the tier: as many as it holds
	// of those the tiers before it did not.
	Replicas int64
}

// PassedGroup is a clusterAffinities group tried before the one used
// (Result.Passed), with why it could not place the binding.
type PassedGroup struct {
	Name   string
	Reason string
}

// overflowTier is one compiled overflowAffinities entry.
type overflowTier struct {
	name    string
	matcher affinityMatcher
}

// compileOverflow compiles the overflow tiers of group a, the index-th.
func compileOverflow(a *v1alpha1.ClusterAffinityTerm, index int) ([]overflowTier, error) {
	if len(a.OverflowAffinities) == 0 {
		return nil, nil
	}
	tiers := make([]overflowTier, len(a.OverflowAffinities))
	for i := range a.OverflowAffinities {
		o := &a.OverflowAffinities[i]
		m, err := compileAffinity(&o.ClusterAffinity)
		if err != nil {
			return nil, fmt.Errorf("placement.clusterAffinities[%d].overflowAffinities[%d] (%s): %w", index, i, o.AffinityName, err)
		}
		tiers[i] = overflowTier{name: o.AffinityName, matcher: m}
	}
	return tiers, nil
}

// checkOverflow rejects overflow tiers with a division that does not
// divide by room, as validation does: only such a division can fill one
// tier before the next.
func checkOverflow(p *v1alpha1.Placement, div division) error {
	if div.kind == divideDynamicWeight || div.kind == divideAggregated {
		return nil
	}
	for i := range p.ClusterAffinities {
		if p.ClusterAffinities[i].OverflowAffinities != nil {
			return fmt.Errorf("placement.clusterAffinities[%d].overflowAffinities: only with replicaScheduling Divided by dynamic weight or Aggregated", i)
		}
	}
	return nil
}

// tiering is which tier each candidate cluster of a group falls in.
type tiering struct {
	names []string       // by tier: the group's name, then its overflow tiers'
	of    map[string]int // cluster name -> tier; absent: in none
}

// tiersOf sorts the candidates into the tiers of t: the first tier whose
// affinity matches a cluster has it. matched is the Fleet's memo of the
// primary affinity, or nil. It also returns, by candidate index, whether
// any tier matches.
func (r *request) tiersOf(t *term, matched []bool) (tiering, []bool) {
	tg := tiering{names: make([]string, 0, 1+len(t.overflow)), of: map[string]int{}}
	tg.names = append(tg.names, t.name)
	memos := make([][]bool, len(t.overflow))
	for k := range t.overflow {
		tg.names = append(tg.names, t.overflow[k].name)
		if r.in.Fleet != nil {
			memos[k] = r.in.Fleet.matching(&t.overflow[k].matcher)
		}
	}
	matches := func(m *affinityMatcher, memo []bool, i int, c *v1alpha1.Cluster) bool {
		if memo != nil {
			return memo[i]
		}
		return m.matches(c)
	}
	fits := make([]bool, len(r.candidates.clusters))
	for i, c := range r.candidates.clusters {
		if matches(&t.matcher, matched, i, c) {
			tg.of[c.Name], fits[i] = 0, true
			continue
		}
		for k := range t.overflow {
			if matches(&t.overflow[k].matcher, memos[k], i, c) {
				tg.of[c.Name], fits[i] = k+1, true
				break
			}
		}
	}
	return tg, fits
}

// divideTiers divides in.Replicas over clusters (selected, sorted by
// name) tier by tier, as Karmada does: each tier gets as many of the
// replicas left as its clusters hold (room plus the replicas they have
// now), divided among them as the division says, with the tier's part of
// the previous result as its previous result. So a scale-up fills the
// primary tier before it overflows, a scale-down empties the last tier
// used first, and a tier that gained room takes replicas back from the
// tiers after it when the binding is scheduled again.
func (d *division) divideTiers(in *Input, room *roomCache, clusters []*v1alpha1.Cluster, tg tiering) ([]v1alpha1.TargetCluster, []Tier, error) {
	prev := make(map[string]int64, len(in.Previous))
	for _, t := range in.Previous {
		prev[t.Name] += int64(max(t.Replicas, 0))
	}
	byTier := make([][]*v1alpha1.Cluster, len(tg.names))
	for _, c := range clusters {
		k := tg.of[c.Name]
		byTier[k] = append(byTier[k], c)
	}
	tiers := make([]Tier, len(tg.names))
	var out []v1alpha1.TargetCluster
	left := int64(in.Replicas)
	for k, cs := range byTier {
		tier := Tier{Name: tg.names[k], Clusters: make([]string, len(cs))}
		for i, c := range cs {
			tier.Clusters[i] = c.Name
			tier.Capacity = addSat(tier.Capacity, addSat(room.of(c), prev[c.Name]))
		}
		if tier.Replicas = min(left, tier.Capacity); tier.Replicas > 0 {
			targets, err := divideByCapacity(capacityRequest{
				replicas: tier.Replicas, previous: in.Previous, room: room, fresh: in.Fresh, ties: tiesFor(in.TemplateUID),
			}, d.kind == divideAggregated, cs)
			if err != nil {
				return nil, nil, fmt.Errorf("overflow tier %s: %w", tier.Name, err)
			}
			out = append(out, targets...)
			left -= tier.Replicas
		}
		tiers[k] = tier
	}
	if left > 0 {
		return nil, nil, tiersFull(in, room, clusters, prev)
	}
	slices.SortFunc(out, func(a, b v1alpha1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, tiers, nil
}

// tiersFull is the error when every tier together lacks room: worded as
// for a division without tiers, since the clusters of all of them were
// counted.
func tiersFull(in *Input, room *roomCache, clusters []*v1alpha1.Cluster, prev map[string]int64) error {
	slots := make([]slot, len(clusters))
	var kept int64
	for i, c := range clusters {
		slots[i] = slot{name: c.Name, prev: prev[c.Name], avail: room.of(c)}
		kept += prev[c.Name]
	}
	if in.Fresh {
		return newCapacityError(int64(in.Replicas), int64(in.Replicas), slots, capacity)
	}
	return newCapacityError(int64(in.Replicas), int64(in.Replicas)-kept, slots, free)
}
