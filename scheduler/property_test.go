package scheduler

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestScheduleProperties checks the invariants on many random inputs; the
// fuzz target below explores further with `go test -fuzz FuzzSchedule`.
func TestScheduleProperties(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 42))
		in := randomInput(r)
		got, err := Schedule(in)
		checkInvariants(t, fmt.Sprintf("seed %d", seed), in, got, err)
	}
}

func FuzzSchedule(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(seed, seed*7919)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		in := randomInput(rand.New(rand.NewPCG(a, b)))
		got, err := Schedule(in)
		checkInvariants(t, fmt.Sprintf("seed %d,%d", a, b), in, got, err)
	})
}

// checkInvariants holds for every valid input:
//   - only UnschedulableError: NoClusterFit only when no affinity group
//     leaves a cluster, Unschedulable only for dynamic weights or
//     Aggregated when the selected clusters lack room;
//   - the result is sorted, has no duplicates and stays within the clusters
//     that fit the group used (an earlier group must leave none);
//   - no cluster with an untolerated NoSchedule/NoExecute taint, unless it
//     was already placed;
//   - Duplicated (or no replicas) takes every fitting cluster with all
//     replicas; Divided hands out exactly Replicas, none to a cluster with 0;
//   - dynamic weights and Aggregated give no cluster more than its room
//     plus what it had, and in Steady mode keep the previous result when
//     the total is unchanged, only add on scale-up and only remove on
//     scale-down;
//   - Aggregated uses as few clusters as hold the replicas: Fresh, by
//     capacity; scale-down, of those with replicas; scale-up, new ones
//     after every used one.
func checkInvariants(t *testing.T, label string, in Input, got Result, err error) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s\ninput: %s\nresult: %+v, error: %v", label, fmt.Sprintf(format, args...), describe(in), got, err)
	}
	fits := func(a *v1alpha1.ClusterAffinity) []*v1alpha1.Cluster {
		t.Helper()
		var tolerations []corev1.Toleration
		if in.Placement != nil {
			tolerations = in.Placement.ClusterTolerations
		}
		fit, _, ferr := Filter(a, tolerations, in.Clusters, in.Previous, in.Evicted)
		if ferr != nil {
			fail("Filter: %v", ferr)
		}
		return fit
	}
	spreads := in.Placement != nil && len(in.Placement.SpreadConstraints) > 0
	evicted := map[string]bool{}
	for _, n := range in.Evicted {
		evicted[n] = true
	}
	// Groups are tried from the observed one (the first when Fresh),
	// wrapping around; the one used is the first that schedules alone, and
	// on failure every group failed and the error is the last one's.
	groups := triedGroups(in)
	used := len(groups) - 1
	if err == nil {
		used = slices.IndexFunc(groups, func(g affinityGroup) bool { return g.name == got.AffinityName })
		if used < 0 {
			fail("used group %q is unknown", got.AffinityName)
		}
	}
	for _, g := range groups[:used] {
		if _, gerr := Schedule(alone(in, g)); gerr == nil {
			fail("group %q schedules alone but was passed over", g.name)
		}
	}
	if err != nil {
		if _, gerr := Schedule(alone(in, groups[used])); gerr == nil {
			fail("unschedulable, but the last group tried, %q, schedules alone", groups[used].name)
		}
	}
	group := groups[used].name
	tiered := len(groups[used].overflow) > 0 && in.Replicas > 0
	selected := fits(groups[used].affinity)
	if tiered {
		selected = fitsAny(in, groups[used], fits)
	}

	if err != nil {
		var ue *UnschedulableError
		if !errors.As(err, &ue) {
			fail("plain error on a valid input")
		}
		switch {
		case ue.Reason == v1alpha1.ReasonNoClusterFit && strings.HasPrefix(ue.Message, "spread by "):
			if !spreads || len(selected) == 0 {
				fail("spread error without spread constraints or fitting clusters")
			}
			if len(ue.FilterReasons)+len(selected) != len(in.Clusters) {
				fail("filter reasons for %d clusters, %d fit, %d in all", len(ue.FilterReasons), len(selected), len(in.Clusters))
			}
		case ue.Reason == v1alpha1.ReasonNoClusterFit:
			if len(ue.FilterReasons) != len(in.Clusters) || !strings.HasPrefix(ue.Message, fmt.Sprintf("0/%d clusters are available", len(in.Clusters))) {
				fail("reasons do not cover every cluster")
			}
			if len(selected) > 0 {
				fail("no cluster fits, but group %q leaves some", group)
			}
		case ue.Reason == v1alpha1.ReasonUnschedulable:
			if !byCapacity(in.Placement) || in.Replicas == 0 || len(selected) == 0 {
				fail("no room reported for a division that does not need any")
			}
			if spreads {
				// The spread chose some of the fitting clusters: check on those.
				selected = slices.DeleteFunc(selected, func(c *v1alpha1.Cluster) bool { _, ok := ue.Room[c.Name]; return !ok })
			}
			room := roomOf(in, selected)
			if len(ue.Room) != len(selected) {
				fail("room listed for %d clusters, want the %d selected", len(ue.Room), len(selected))
			}
			var free, total int64
			for _, c := range selected {
				free += room[c.Name].free
				total += room[c.Name].free + room[c.Name].prev
			}
			kept := total - free
			if in.Fresh && total >= int64(in.Replicas) {
				fail("fresh: room for %d, need %d, but unschedulable", total, in.Replicas)
			}
			if !in.Fresh && (kept >= int64(in.Replicas) || free >= int64(in.Replicas)-kept) {
				fail("steady: %d kept, room for %d more, need %d in all, but unschedulable", kept, free, in.Replicas)
			}
		default:
			fail("reason %q", ue.Reason)
		}
		return
	}
	if len(selected) == 0 {
		fail("scheduled, but no group fits")
	}
	selectedNames := map[string]bool{}
	for _, c := range selected {
		selectedNames[c.Name] = true
	}
	byName := map[string]*v1alpha1.Cluster{}
	for _, c := range in.Clusters {
		byName[c.Name] = c
	}
	placed := targetNames(in.Previous)
	var sum int64
	for i, tc := range got.Clusters {
		if i > 0 && got.Clusters[i-1].Name >= tc.Name {
			fail("not sorted or duplicated at %q", tc.Name)
		}
		if !selectedNames[tc.Name] {
			fail("%q is not among the fitting clusters", tc.Name)
		}
		if evicted[tc.Name] {
			fail("%q is being evicted", tc.Name)
		}
		if !placed[tc.Name] {
			for _, taint := range byName[tc.Name].Spec.Taints {
				hard := taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute || taint.Effect == v1alpha1.TaintEffectPreferNoExecute
				if hard && !Tolerates(in.Placement.ClusterTolerations, &taint) {
					fail("%q has untolerated taint %v", tc.Name, taint)
				}
			}
		}
		sum += int64(tc.Replicas)
	}
	if isDivided(in.Placement) && in.Replicas > 0 {
		if sum != int64(in.Replicas) {
			fail("divided %d replicas, want %d", sum, in.Replicas)
		}
		if slices.ContainsFunc(got.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Replicas == 0 }) {
			fail("a cluster with 0 replicas is listed")
		}
		if spreads {
			checkSpread(in, got, false, fail)
		}
		if tiered {
			checkTiers(in, groups[used], selected, spreads, got, fits, fail)
			return
		}
		if len(got.Tiers) > 0 {
			fail("tiers reported for a group without overflow tiers")
		}
		if byCapacity(in.Placement) {
			if spreads {
				// Which fitting clusters the spread chose is not known here:
				// check the caps only.
				room := roomOf(in, selected)
				for _, tc := range got.Clusters {
					if r := room[tc.Name]; int64(tc.Replicas) > r.free+r.prev {
						fail("%q got %d replicas, room for %d plus %d it had", tc.Name, tc.Replicas, r.free, r.prev)
					}
				}
				return
			}
			checkRoom(in, roomOf(in, selected), got, fail)
			if isAggregated(in.Placement) {
				checkFewest(in, roomOf(in, selected), got, fail)
			}
		}
		return
	}
	if spreads {
		// Every chosen cluster is listed: the last constraint's groups are
		// within its bounds.
		checkSpread(in, got, true, fail)
		for _, tc := range got.Clusters {
			if tc.Replicas != in.Replicas {
				fail("%q got %d replicas, want %d", tc.Name, tc.Replicas, in.Replicas)
			}
		}
		return
	}
	if len(got.Clusters) != len(selected) {
		fail("%d clusters, want every one of the %d fitting", len(got.Clusters), len(selected))
	}
	for _, tc := range got.Clusters {
		if tc.Replicas != in.Replicas {
			fail("%q got %d replicas, want %d", tc.Name, tc.Replicas, in.Replicas)
		}
	}
}

// checkSpread checks that the result spans no more than maxGroups groups of
// any constraint (each narrows the previous one's choice, so that holds for
// all) and, when complete (every chosen cluster listed), at least minGroups
// (at least 1) of the last one; and that every cluster has a value for every
// constraint.
func checkSpread(in Input, got Result, complete bool, fail func(string, ...any)) {
	byName := map[string]*v1alpha1.Cluster{}
	for _, c := range in.Clusters {
		byName[c.Name] = c
	}
	cs := in.Placement.SpreadConstraints
	for i, sc := range cs {
		groups := map[string]bool{}
		for _, tc := range got.Clusters {
			c := byName[tc.Name]
			var v string
			switch sc.SpreadByField {
			case v1alpha1.SpreadByFieldCluster:
				v = c.Name
			case v1alpha1.SpreadByFieldRegion:
				v = c.Spec.Region
			case v1alpha1.SpreadByFieldZone:
				v = c.Spec.Zone
			case v1alpha1.SpreadByFieldProvider:
				v = c.Spec.Provider
			default:
				v = c.Labels[sc.SpreadByLabel]
			}
			if v == "" {
				fail("%q has no value for spread constraint %d", tc.Name, i)
			}
			groups[v] = true
		}
		if sc.MaxGroups > 0 && len(groups) > sc.MaxGroups {
			fail("spread constraint %d: %d groups, max %d", i, len(groups), sc.MaxGroups)
		}
		if complete && i == len(cs)-1 && len(groups) < max(sc.MinGroups, 1) {
			fail("spread constraint %d: %d groups, min %d", i, len(groups), sc.MinGroups)
		}
	}
}

// clusterRoom is a selected cluster's free room and previous replicas.
type clusterRoom struct{ free, prev int64 }

func roomOf(in Input, selected []*v1alpha1.Cluster) map[string]clusterRoom {
	room := map[string]clusterRoom{}
	for _, c := range selected {
		room[c.Name] = clusterRoom{free: AvailableReplicas(c, in.Requirements)}
	}
	for _, tc := range in.Previous {
		if r, ok := room[tc.Name]; ok && tc.Replicas > 0 {
			r.prev += int64(tc.Replicas)
			room[tc.Name] = r
		}
	}
	return room
}

// checkRoom checks a dynamic or Aggregated result of a positive number of
// replicas.
func checkRoom(in Input, room map[string]clusterRoom, got Result, fail func(string, ...any)) {
	var kept int64
	for _, r := range room {
		kept += r.prev
	}
	gotBy := map[string]int64{}
	for _, tc := range got.Clusters {
		gotBy[tc.Name] = int64(tc.Replicas)
		if r := room[tc.Name]; gotBy[tc.Name] > r.free+r.prev {
			fail("%q got %d replicas, room for %d plus %d it had", tc.Name, tc.Replicas, r.free, r.prev)
		}
	}
	if in.Fresh {
		return
	}
	for name, r := range room {
		switch n := gotBy[name]; {
		case kept == int64(in.Replicas) && n != r.prev:
			fail("no change, but %q went from %d to %d", name, r.prev, n)
		case kept < int64(in.Replicas) && n < r.prev:
			fail("scale-up took %q from %d to %d", name, r.prev, n)
		case kept > int64(in.Replicas) && n > r.prev:
			fail("scale-down took %q from %d to %d", name, r.prev, n)
		}
	}
}

// checkFewest checks that an Aggregated result of a positive number of
// replicas, without spread, uses the fewest clusters that hold them.
func checkFewest(in Input, room map[string]clusterRoom, got Result, fail func(string, ...any)) {
	var kept int64
	var capacities, prevs, usedFree, unusedFree []int64
	for _, r := range room {
		kept += r.prev
		capacities = append(capacities, r.free+r.prev)
		prevs = append(prevs, r.prev)
		if r.prev > 0 {
			usedFree = append(usedFree, r.free)
		} else {
			unusedFree = append(unusedFree, r.free)
		}
	}
	replicas := int64(in.Replicas)
	var want, n int
	switch {
	case in.Fresh:
		want, n = fewest(replicas, 0, capacities), len(got.Clusters)
	case kept > replicas:
		want, n = fewest(replicas, 0, prevs), len(got.Clusters)
	case kept < replicas:
		// The used clusters come first; new ones only if they lack room.
		var free int64
		for _, f := range usedFree {
			free += f
		}
		want = fewest(replicas-kept, free, unusedFree)
		for _, tc := range got.Clusters {
			if room[tc.Name].prev == 0 {
				n++
			}
		}
	default:
		return
	}
	if n != want {
		fail("Aggregated: %d clusters (new ones on a scale-up), the fewest is %d", n, want)
	}
}

// fewest is how many of values, largest first, added to start reach need.
func fewest(need, start int64, values []int64) int {
	values = slices.Clone(values)
	slices.SortFunc(values, func(a, b int64) int { return cmp.Compare(b, a) })
	k := 0
	for sum := start; sum < need; k++ {
		sum += values[k]
	}
	return k
}

type affinityGroup struct {
	name     string
	affinity *v1alpha1.ClusterAffinity
	overflow []v1alpha1.OverflowClusterAffinity
}

func affinityGroups(p *v1alpha1.Placement) []affinityGroup {
	if p == nil {
		return []affinityGroup{{}}
	}
	if len(p.ClusterAffinities) == 0 {
		return []affinityGroup{{affinity: p.ClusterAffinity}}
	}
	var gs []affinityGroup
	for i := range p.ClusterAffinities {
		a := &p.ClusterAffinities[i]
		gs = append(gs, affinityGroup{name: a.AffinityName, affinity: &a.ClusterAffinity, overflow: a.OverflowAffinities})
	}
	return gs
}

// triedGroups is the order Schedule tries the affinity groups in.
func triedGroups(in Input) []affinityGroup {
	gs := affinityGroups(in.Placement)
	start := 0
	if !in.Fresh && in.ObservedAffinity != "" {
		start = max(0, slices.IndexFunc(gs, func(g affinityGroup) bool { return g.name == in.ObservedAffinity }))
	}
	return append(gs[start:], gs[:start]...)
}

// alone is in with group g as its only cluster affinity (its only
// group, if it has overflow tiers).
func alone(in Input, g affinityGroup) Input {
	if in.Placement == nil {
		return in
	}
	p := *in.Placement
	p.ClusterAffinities, p.ClusterAffinity = nil, g.affinity
	if g.overflow != nil {
		p.ClusterAffinities, p.ClusterAffinity = []v1alpha1.ClusterAffinityTerm{{AffinityName: g.name, ClusterAffinity: *g.affinity, OverflowAffinities: g.overflow}}, nil
	}
	in.Placement = &p
	return in
}

// byCapacity reports whether p divides by room: dynamic weights or Aggregated.
func byCapacity(p *v1alpha1.Placement) bool {
	if !isDivided(p) {
		return false
	}
	s := p.ReplicaScheduling
	return s.ReplicaDivisionPreference == v1alpha1.ReplicaDivisionPreferenceAggregated ||
		s.WeightPreference != nil && s.WeightPreference.DynamicWeight != ""
}

func isAggregated(p *v1alpha1.Placement) bool {
	return isDivided(p) && p.ReplicaScheduling.ReplicaDivisionPreference == v1alpha1.ReplicaDivisionPreferenceAggregated
}

func isDivided(p *v1alpha1.Placement) bool {
	return p != nil && p.ReplicaScheduling != nil && p.ReplicaScheduling.ReplicaSchedulingType == v1alpha1.ReplicaSchedulingTypeDivided
}

// describe is the input as JSON, to reproduce a failure.
func describe(in Input) string {
	b, err := json.Marshal(in)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// pick returns one of choices.
func pick[T any](r *rand.Rand, choices ...T) T { return choices[r.IntN(len(choices))] }

// some returns each of choices with probability p.
func some[T any](r *rand.Rand, p float64, choices ...T) []T {
	var out []T
	for _, c := range choices {
		if r.Float64() < p {
			out = append(out, c)
		}
	}
	return out
}

var randomTaints = []corev1.Taint{
	{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute},
	{Key: v1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	{Key: "slow", Effect: corev1.TaintEffectPreferNoSchedule},
	{Key: "degraded", Effect: v1alpha1.TaintEffectPreferNoExecute},
}

var randomTolerations = []corev1.Toleration{
	{Key: "cluster.karmada.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: v1alpha1.TaintClusterNotReady, Operator: corev1.TolerationOpExists},
	{Key: "dedicated", Value: "gpu"},
	{Key: "dedicated", Value: "fpga", Effect: corev1.TaintEffectNoSchedule},
}

func randomInput(r *rand.Rand) Input {
	n := r.IntN(10)
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("m%02d", i))
	}
	in := Input{Replicas: int32(pick(r, 0, 1, 2, 3, 7, 40, r.IntN(100)))}
	for _, name := range all {
		c := newCluster(name,
			located(pick(r, "", "aws", "gcp"), pick(r, "", "r1", "r2"), pick(r, "", "z1", "z2")),
			labeled("env", pick(r, "prod", "dev")))
		c.Spec.Taints = some(r, 0.15, randomTaints...)
		if r.IntN(6) > 0 {
			c.Status.ResourceSummary = &v1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{
					corev1.ResourcePods:   *resource.NewQuantity(r.Int64N(40), resource.DecimalSI),
					corev1.ResourceCPU:    *resource.NewMilliQuantity(r.Int64N(16000), resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(r.Int64N(64)<<30, resource.BinarySI),
				},
				Allocated: corev1.ResourceList{
					corev1.ResourcePods: *resource.NewQuantity(r.Int64N(20), resource.DecimalSI),
					corev1.ResourceCPU:  *resource.NewMilliQuantity(r.Int64N(12000), resource.DecimalSI),
				},
			}
		}
		in.Clusters = append(in.Clusters, c)
	}
	r.Shuffle(len(in.Clusters), func(i, j int) { in.Clusters[i], in.Clusters[j] = in.Clusters[j], in.Clusters[i] })
	for _, name := range append(some(r, 0.3, all...), some(r, 0.3, "gone")...) {
		in.Previous = append(in.Previous, v1alpha1.TargetCluster{Name: name, Replicas: int32(r.IntN(8))})
	}
	in.Fresh = r.IntN(2) == 0
	in.Evicted = some(r, 0.1, all...)
	in.TemplateUID = randomUID(r)
	switch r.IntN(3) {
	case 0:
	case 1:
		in.Requirements = &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(pick(r, int64(0), 100, 250, 1000), resource.DecimalSI)}}
	default:
		in.Requirements = &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(pick(r, int64(50), 500), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(pick(r, int64(1)<<30, 3<<29), resource.BinarySI)}}
	}
	if r.IntN(10) == 0 {
		return in // no placement
	}
	p := &v1alpha1.Placement{ClusterTolerations: some(r, 0.3, randomTolerations...)}
	if r.IntN(3) == 0 {
		for i := range r.IntN(4) {
			p.ClusterAffinities = append(p.ClusterAffinities, v1alpha1.ClusterAffinityTerm{AffinityName: fmt.Sprintf("group%d", i), ClusterAffinity: *randomAffinity(r, all)})
		}
		in.ObservedAffinity = pick(r, "", "group1", "group3")
	} else if r.IntN(2) == 0 {
		p.ClusterAffinity = randomAffinity(r, all)
	}
	switch r.IntN(5) {
	case 0:
		p.ReplicaScheduling = pick(r, nil, &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDuplicated})
	case 1, 2:
		p.ReplicaScheduling = pick(r, dynamicWeight(), aggregated())
		for i := range p.ClusterAffinities {
			if r.IntN(3) > 0 {
				p.ClusterAffinities[i].OverflowAffinities = randomOverflow(r, all)
			}
		}
	default:
		var rules []v1alpha1.StaticClusterWeight
		for range r.IntN(4) {
			rules = append(rules, v1alpha1.StaticClusterWeight{TargetCluster: *randomAffinity(r, all), Weight: r.Int64N(5)})
		}
		p.ReplicaScheduling = divided(rules...)
	}
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(2) {
			c := v1alpha1.SpreadConstraint{MinGroups: r.IntN(3), MaxGroups: r.IntN(4)}
			if c.MaxGroups > 0 && c.MaxGroups < c.MinGroups {
				c.MaxGroups = c.MinGroups
			}
			if r.IntN(5) == 0 {
				c.SpreadByLabel = "env"
			} else {
				c.SpreadByField = pick(r, v1alpha1.SpreadByFieldCluster, v1alpha1.SpreadByFieldRegion, v1alpha1.SpreadByFieldZone, v1alpha1.SpreadByFieldProvider)
			}
			p.SpreadConstraints = append(p.SpreadConstraints, c)
		}
	}
	in.Placement = p
	return in
}

func randomAffinity(r *rand.Rand, all []string) *v1alpha1.ClusterAffinity {
	a := &v1alpha1.ClusterAffinity{}
	if r.IntN(3) == 0 {
		a.ClusterNames = some(r, 0.5, all...)
	}
	if r.IntN(3) == 0 {
		a.Exclude = some(r, 0.2, all...)
	}
	if r.IntN(3) == 0 {
		a.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": pick(r, "prod", "dev")}}
	}
	if r.IntN(3) == 0 {
		a.FieldSelector = fields(pick(r,
			field("provider", corev1.NodeSelectorOpIn, "aws"),
			field("region", corev1.NodeSelectorOpNotIn, "r1"),
			field("zone", corev1.NodeSelectorOpExists),
			field("provider", corev1.NodeSelectorOpDoesNotExist)))
	}
	return a
}
