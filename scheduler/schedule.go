package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Input is one scheduling request.
type Input struct {
	Placement *v1alpha1.Placement      // nil = no constraints, Duplicated
	Replicas  int32                    // spec.replicas of the binding; 0 for kinds without replicas
	Previous  []v1alpha1.TargetCluster // the binding's current spec.clusters (may be empty)
	Clusters  []*v1alpha1.Cluster      // every known cluster, any order; do not modify them
	// Fleet, when set, is every known cluster prepared by NewFleet, and
	// Clusters is ignored: callers that schedule many bindings over the
	// same clusters build it once.
	Fleet *Fleet
	// Requirements is what one replica requests (binding.spec.replicaRequirements); nil = nothing but a pod slot.
	Requirements *v1alpha1.ReplicaRequirements
	// Fresh asks for a fresh division (rebalance / failback) instead of keeping the previous result.
	Fresh bool
	// Evicted are the clusters in the binding's graceful eviction tasks:
	// never candidates, even when in Previous.
	Evicted []string
	// ObservedAffinity is the clusterAffinities group the binding uses now
	// (status.schedulerObservedAffinityName): groups are tried from it on.
	ObservedAffinity string
	// APIVersion and Kind are the template's. A cluster whose agent reported
	// the APIs it serves without this kind is no candidate; empty skips the
	// check.
	APIVersion, Kind string
	// TemplateUID is the template's UID (binding.spec.resource.uid). As in
	// Karmada, it decides which way Webster breaks a tie between clusters
	// by name (see [Webster]); empty: to the lower name.
	TemplateUID types.UID
	// Explain asks for Result.Passed: why each clusterAffinities group
	// tried before the one used could not place the binding. It costs a
	// second look at every cluster per such group, which the hub does not
	// need; "flotilla plan" does.
	Explain bool
}

// Result is a successful decision.
type Result struct {
	Clusters     []v1alpha1.TargetCluster // sorted by name; see division rules
	AffinityName string                   // name of the clusterAffinities group used, "" otherwise
	// Tiers, when the group used has overflowAffinities and the binding
	// has replicas, are its tiers in order, primary first, and how each
	// was used; nil otherwise.
	Tiers []Tier
	// Passed are the groups tried before the one used, in order, with
	// why each failed; only with Input.Explain.
	Passed []PassedGroup
}

// Schedule picks the clusters for one binding and divides its replicas
// among them. It returns an *UnschedulableError when no cluster fits or,
// for dynamic weights and Aggregated, the clusters that fit lack room; and
// a plain error when the input is invalid (bad selector, unknown strategy,
// duplicate cluster names). The placement is checked before any cluster is
// looked at, so a broken policy is reported as such even when no cluster
// would fit anyway.
func Schedule(in Input) (Result, error) {
	if in.Replicas < 0 {
		return Result{}, fmt.Errorf("replicas %d: must not be negative", in.Replicas)
	}
	placement := in.Placement
	if placement == nil {
		placement = &v1alpha1.Placement{}
	}
	terms, err := compileTerms(placement)
	if err != nil {
		return Result{}, err
	}
	div, err := compileDivision(placement.ReplicaScheduling)
	if err != nil {
		return Result{}, fmt.Errorf("placement.replicaScheduling: %w", err)
	}
	if err := checkOverflow(placement, div); err != nil {
		return Result{}, err
	}
	spreads, err := compileSpreads(placement.SpreadConstraints)
	if err != nil {
		return Result{}, err
	}
	var clusters []*v1alpha1.Cluster
	if in.Fleet != nil {
		clusters = in.Fleet.clusters
	} else if clusters, err = sortedClusters(in.Clusters); err != nil {
		return Result{}, err
	}
	r := request{
		in: &in,
		candidates: candidates{
			clusters:    clusters,
			tolerations: placement.ClusterTolerations,
			placed:      targetNames(in.Previous),
			excluded:    exclusions(in.Evicted, in.APIVersion, in.Kind, clusters, in.Fleet),
		},
		div:     div,
		spreads: spreads,
		room:    newRoomCache(in.Requirements, in.Fleet),
	}
	order := termOrder(terms, in.ObservedAffinity, in.Fresh)
	var lastErr error
	var passed []PassedGroup
	for i, t := range order {
		last := i == len(order)-1
		targets, tiers, err := r.scheduleTerm(&terms[t], last || in.Explain)
		if err == nil {
			return Result{Clusters: targets, AffinityName: terms[t].name, Tiers: tiers, Passed: passed}, nil
		}
		if !errors.As(err, new(*UnschedulableError)) {
			return Result{}, err
		}
		if in.Explain {
			passed = append(passed, PassedGroup{Name: terms[t].name, Reason: err.Error()})
		}
		lastErr = err
	}
	return Result{}, lastErr
}

// request is one Schedule call, compiled once for every affinity group
// it tries.
type request struct {
	in *Input
	// candidates are every cluster, sorted by name, with what decides a
	// cluster's fit besides the affinity.
	candidates candidates
	div        division
	spreads    []spreadRule
	room       *roomCache
}

// scheduleTerm selects, spreads and divides with one affinity group, and
// says how its tiers were used if it has overflow tiers. When it fails and
// explain is set, the error says why each cluster was left out.
//
// Overflow tiers count only for a binding with replicas (as in Karmada,
// where they are for workloads): a cluster fits when it fits any tier.
func (r *request) scheduleTerm(t *term, explain bool) ([]v1alpha1.TargetCluster, []Tier, error) {
	var matched []bool
	if r.in.Fleet != nil {
		matched = r.in.Fleet.matching(&t.matcher)
	}
	var tg tiering
	tiered := len(t.overflow) > 0 && r.in.Replicas > 0
	if tiered {
		tg, matched = r.tiersOf(t, matched)
	}
	reasons := func() map[string]string {
		why := map[string]string{}
		if tiered {
			r.candidates.filter(&t.matcher, matched, why)
		} else {
			r.candidates.filter(&t.matcher, nil, why)
		}
		return why
	}
	selected := r.candidates.filter(&t.matcher, matched, nil)
	if len(selected) == 0 {
		if !explain {
			return nil, nil, &UnschedulableError{Reason: v1alpha1.ReasonNoClusterFit}
		}
		return nil, nil, newUnschedulableError(len(r.candidates.clusters), reasons())
	}
	if len(r.spreads) > 0 {
		s := newScorer(r.in.Previous, &t.matcher, r.candidates.tolerations)
		s.tier = tg.of
		var err error
		if selected, err = spread(r.spreads, r.in, &s, r.room, selected); err != nil {
			var ue *UnschedulableError
			if explain && errors.As(err, &ue) {
				ue.FilterReasons = reasons()
			}
			return nil, nil, err
		}
	}
	if tiered {
		return r.div.divideTiers(r.in, r.room, selected, tg)
	}
	targets, err := r.div.divide(r.in, r.room, selected)
	return targets, nil, err
}

// termOrder is the order to try the affinity groups in: from the one the
// binding uses now (observed) to the last, then from the first. Starting
// at the group in use keeps a binding that fell back to a later group
// there when an earlier one recovers (as Karmada does); a Fresh reschedule
// (rebalance, failback) starts from the first, preferred group.
func termOrder(terms []term, observed string, fresh bool) []int {
	start := 0
	if !fresh {
		for i := range terms {
			if observed != "" && terms[i].name == observed {
				start = i
				break
			}
		}
	}
	order := make([]int, 0, len(terms))
	for i := range terms {
		order = append(order, (start+i)%len(terms))
	}
	return order
}

// term is one affinity group to try; name is "" for a plain clusterAffinity.
type term struct {
	name     string
	matcher  affinityMatcher
	overflow []overflowTier // its overflowAffinities, in order
}

// compileTerms returns the affinity groups in the order to try them.
func compileTerms(p *v1alpha1.Placement) ([]term, error) {
	if len(p.ClusterAffinities) == 0 {
		m, err := compileAffinity(p.ClusterAffinity)
		if err != nil {
			return nil, fmt.Errorf("placement.clusterAffinity: %w", err)
		}
		return []term{{matcher: m}}, nil
	}
	// Validation rejects this too; a binding copied before validation
	// existed must not be scheduled by guessing which one was meant.
	if p.ClusterAffinity != nil {
		return nil, errors.New("placement: clusterAffinity and clusterAffinities are exclusive")
	}
	terms := make([]term, len(p.ClusterAffinities))
	for i := range p.ClusterAffinities {
		a := &p.ClusterAffinities[i]
		m, err := compileAffinity(&a.ClusterAffinity)
		if err != nil {
			return nil, fmt.Errorf("placement.clusterAffinities[%d] (%s): %w", i, a.AffinityName, err)
		}
		overflow, err := compileOverflow(a, i)
		if err != nil {
			return nil, err
		}
		terms[i] = term{name: a.AffinityName, matcher: m, overflow: overflow}
	}
	return terms, nil
}

// sortedClusters returns a copy of clusters sorted by name, so the result
// does not depend on the caller's order. Duplicate names would make it
// depend on it, so they are an error.
func sortedClusters(clusters []*v1alpha1.Cluster) ([]*v1alpha1.Cluster, error) {
	if i := slices.Index(clusters, nil); i >= 0 {
		return nil, fmt.Errorf("clusters[%d] is nil", i)
	}
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, func(a, b *v1alpha1.Cluster) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Name == sorted[i-1].Name {
			return nil, fmt.Errorf("cluster %q is listed twice", sorted[i].Name)
		}
	}
	return sorted, nil
}

func targetNames(targets []v1alpha1.TargetCluster) map[string]bool {
	names := make(map[string]bool, len(targets))
	for _, t := range targets {
		names[t.Name] = true
	}
	return names
}
