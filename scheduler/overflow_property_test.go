package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// tierAffinities are the affinities of g's tiers, primary first.
func tierAffinities(g affinityGroup) []*v1alpha1.ClusterAffinity {
	as := []*v1alpha1.ClusterAffinity{g.affinity}
	for i := range g.overflow {
		as = append(as, &g.overflow[i].ClusterAffinity)
	}
	return as
}

// fitsAny is the clusters that fit any tier of g, sorted by name.
func fitsAny(in Input, g affinityGroup, fits func(*v1alpha1.ClusterAffinity) []*v1alpha1.Cluster) []*v1alpha1.Cluster {
	seen := map[string]bool{}
	var out []*v1alpha1.Cluster
	for _, a := range tierAffinities(g) {
		for _, c := range fits(a) {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b *v1alpha1.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// checkTiers checks a result of group g, which has overflow tiers, for
// replicas > 0 (selected: the clusters that fit any tier):
//   - Result.Tiers lists g's tiers in order, each with its selected
//     clusters, every one in the first tier that matches it (without a
//     spread: every fitting cluster of the tier), and its capacity;
//   - the tiers fill in order: each gets min(replicas left, its
//     capacity), so no replica lands in a tier while an earlier one has
//     room, and the total is the binding's replicas;
//   - within a tier, the division keeps its rules (room, Steady keeps,
//     adds or removes only, Aggregated uses the fewest clusters) with the
//     tier's part as the replicas and its part of the previous result;
//   - in Steady mode, a tier loses replicas only when every later tier is
//     left with none: a scale-down empties the last tiers first.
func checkTiers(in Input, g affinityGroup, selected []*v1alpha1.Cluster, spreads bool, got Result, fits func(*v1alpha1.ClusterAffinity) []*v1alpha1.Cluster, fail func(string, ...any)) {
	names := []string{g.name}
	for _, o := range g.overflow {
		names = append(names, o.AffinityName)
	}
	tierOf := map[string]int{}
	for k, a := range tierAffinities(g) {
		for _, c := range fits(a) {
			if _, ok := tierOf[c.Name]; !ok {
				tierOf[c.Name] = k
			}
		}
	}
	if len(got.Tiers) != len(names) {
		fail("%d tiers reported, the group has %d", len(got.Tiers), len(names))
	}
	room := roomOf(in, selected)
	left := int64(in.Replicas)
	drained := ""
	for k, tier := range got.Tiers {
		if tier.Name != names[k] {
			fail("tier %d is named %q, want %q", k, tier.Name, names[k])
		}
		var want []string
		for _, c := range selected {
			if tierOf[c.Name] == k {
				want = append(want, c.Name)
			}
		}
		if !spreads && !slices.Equal(tier.Clusters, want) {
			fail("tier %s has clusters %v, want %v", tier.Name, tier.Clusters, want)
		}
		sub := map[string]clusterRoom{}
		var capacity, kept int64
		for i, n := range tier.Clusters {
			if i > 0 && tier.Clusters[i-1] >= n {
				fail("tier %s: clusters not sorted at %q", tier.Name, n)
			}
			if t, ok := tierOf[n]; !ok || t != k {
				fail("tier %s lists %q, which is in tier %d (ok %v)", tier.Name, n, t, ok)
			}
			sub[n] = room[n]
			capacity += room[n].free + room[n].prev
			kept += room[n].prev
		}
		if tier.Capacity != capacity {
			fail("tier %s: capacity %d, its clusters hold %d", tier.Name, tier.Capacity, capacity)
		}
		var part Result
		var placed int64
		for _, tc := range got.Clusters {
			if _, ok := sub[tc.Name]; ok {
				part.Clusters = append(part.Clusters, tc)
				placed += int64(tc.Replicas)
			}
		}
		share := min(left, capacity)
		if placed != share || tier.Replicas != share {
			fail("tier %s: %d replicas placed, %d reported, want %d (%d left, room for %d)", tier.Name, placed, tier.Replicas, share, left, capacity)
		}
		if drained != "" && placed > 0 {
			fail("tier %s keeps %d replicas, but the earlier tier %s lost some", tier.Name, placed, drained)
		}
		if !in.Fresh && placed < kept {
			drained = tier.Name
		}
		left -= share
		tierIn := in
		tierIn.Replicas = int32(share)
		checkRoom(tierIn, sub, part, fail)
		if isAggregated(in.Placement) {
			checkFewest(tierIn, sub, part, fail)
		}
	}
	if left != 0 {
		fail("%d replicas left over the tiers", left)
	}
	for _, tc := range got.Clusters {
		if _, ok := tierOf[tc.Name]; !ok {
			fail("%q is in no tier", tc.Name)
		}
	}
}

// randomOverflow is up to 3 random overflow tiers.
func randomOverflow(r *rand.Rand, all []string) []v1alpha1.OverflowClusterAffinity {
	var tiers []v1alpha1.OverflowClusterAffinity
	for i := range r.IntN(4) {
		tiers = append(tiers, v1alpha1.OverflowClusterAffinity{AffinityName: fmt.Sprintf("tier%d", i), ClusterAffinity: *randomAffinity(r, all)})
	}
	return tiers
}

// TestOverflowMatchesKarmadaModel compares Schedule with Karmada's
// division tier by tier (karmadaOverflow) on random tiered fleets, and
// checks the invariants too; `go test -fuzz FuzzOverflow` explores
// further.
func TestOverflowMatchesKarmadaModel(t *testing.T) {
	for seed := range uint64(3000) {
		checkOverflowDivision(t, rand.New(rand.NewPCG(seed, 30)))
	}
}

func FuzzOverflow(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(seed, seed*104729)
	}
	f.Fuzz(func(t *testing.T, a, b uint64) {
		checkOverflowDivision(t, rand.New(rand.NewPCG(a, b)))
	})
}

// karmadaOverflow models Karmada's assignment over overflow tiers
// (assignWorkloadReplicas): each tier in order takes min(replicas left,
// the room plus previous replicas of its clusters), divided as without
// tiers over its clusters; nil when the tiers lack room.
func karmadaOverflow(replicas int64, tiers [][]modelCluster, fresh, aggregated bool, uid types.UID) map[string]int64 {
	out := map[string]int64{}
	left := replicas
	for _, tier := range tiers {
		if left == 0 {
			break
		}
		var capacity int64
		for _, c := range tier {
			capacity += c.room + c.prev
		}
		n := min(left, capacity)
		if n == 0 {
			continue
		}
		part := karmadaDivision(n, tier, fresh, aggregated, uid)
		if part == nil {
			return nil
		}
		for name, v := range part {
			out[name] = v
		}
		left -= n
	}
	if left > 0 {
		return nil
	}
	return positive(out)
}

// checkOverflowDivision schedules a random tiered division and checks it
// against the model and the invariants.
func checkOverflowDivision(t *testing.T, r *rand.Rand) {
	t.Helper()
	in, tiers := randomOverflowDivision(r)
	want := karmadaOverflow(int64(in.Replicas), tiers, in.Fresh, isAggregated(in.Placement), in.TemplateUID)
	checkAgainstKarmada(t, in, want)
}

// randomOverflowDivision is a dynamic or Aggregated request over up to 12
// clusters in up to 4 tiers (one group, tiers by cluster names; some
// clusters listed again in a later tier, where they do not count, and
// some in none), and the tiers as the model sees them.
func randomOverflowDivision(r *rand.Rand) (Input, [][]modelCluster) {
	n := 1 + r.IntN(12)
	ntiers := 1 + r.IntN(4)
	maxRoom := pick(r, 2, 5, 20)
	tierNames := make([][]string, ntiers)
	model := make([][]modelCluster, ntiers)
	var clusters []*v1alpha1.Cluster
	var previous []v1alpha1.TargetCluster
	for i := range n {
		c := modelCluster{name: fmt.Sprintf("m%02d", i), room: r.Int64N(int64(maxRoom) + 1)}
		clusters = append(clusters, newCluster(c.name, roomFor(int(c.room))))
		k := r.IntN(ntiers + 1) // ntiers: in no tier
		if r.IntN(2) == 0 {
			c.listed, c.prev = true, r.Int64N(6)
			previous = append(previous, v1alpha1.TargetCluster{Name: c.name, Replicas: int32(c.prev)})
		}
		if k == ntiers {
			continue
		}
		tierNames[k] = append(tierNames[k], c.name)
		model[k] = append(model[k], c)
		if later := k + 1 + r.IntN(ntiers); later < ntiers && r.IntN(3) == 0 {
			tierNames[later] = append(tierNames[later], c.name) // ignored there
		}
	}
	if r.IntN(4) == 0 {
		previous = append(previous, v1alpha1.TargetCluster{Name: "gone", Replicas: int32(1 + r.IntN(5))})
	}
	r.Shuffle(len(clusters), func(i, j int) { clusters[i], clusters[j] = clusters[j], clusters[i] })
	r.Shuffle(len(previous), func(i, j int) { previous[i], previous[j] = previous[j], previous[i] })
	// An empty clusterNames matches every cluster: name one that is not
	// there instead.
	affinity := func(names []string) v1alpha1.ClusterAffinity {
		return v1alpha1.ClusterAffinity{ClusterNames: append(slices.Clone(names), "absent")}
	}
	group := v1alpha1.ClusterAffinityTerm{AffinityName: "primary", ClusterAffinity: affinity(tierNames[0]), OverflowAffinities: []v1alpha1.OverflowClusterAffinity{}}
	for k := 1; k < ntiers; k++ {
		group.OverflowAffinities = append(group.OverflowAffinities, v1alpha1.OverflowClusterAffinity{AffinityName: fmt.Sprintf("tier%d", k), ClusterAffinity: affinity(tierNames[k])})
	}
	in := byRoom(pick(r, dynamicWeight(), aggregated()), int32(1+r.IntN(4*maxRoom*ntiers)), r.IntN(3) == 0, previous, clusters)
	in.Placement.ClusterAffinities = []v1alpha1.ClusterAffinityTerm{group}
	in.ObservedAffinity = "primary"
	in.TemplateUID = randomUID(r)
	return in, model
}
