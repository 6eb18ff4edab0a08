package scheduler

import (
	"fmt"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// divisionKind is how replicas are divided among the selected clusters.
type divisionKind int

const (
	divideDuplicated divisionKind = iota
	divideStaticWeight
	divideDynamicWeight // weightPreference.dynamicWeight: AvailableReplicas
	divideAggregated
)

// division is a parsed ReplicaSchedulingStrategy.
type division struct {
	kind  divisionKind
	rules []weightRule // divideStaticWeight
}

// weightRule is one staticWeightList entry.
type weightRule struct {
	matcher affinityMatcher
	weight  int64
}

// compileDivision checks the strategy; errors name the offending field.
func compileDivision(s *v1alpha1.ReplicaSchedulingStrategy) (division, error) {
	if s == nil {
		return division{kind: divideDuplicated}, nil
	}
	switch s.ReplicaSchedulingType {
	case "", v1alpha1.ReplicaSchedulingTypeDuplicated:
		return division{kind: divideDuplicated}, nil
	case v1alpha1.ReplicaSchedulingTypeDivided:
	default:
		return division{}, fmt.Errorf("replicaSchedulingType %q: unknown, want %s or %s",
			s.ReplicaSchedulingType, v1alpha1.ReplicaSchedulingTypeDuplicated, v1alpha1.ReplicaSchedulingTypeDivided)
	}
	var pref v1alpha1.ClusterPreferences
	if s.WeightPreference != nil {
		pref = *s.WeightPreference
	}
	switch pref.DynamicWeight {
	case "", v1alpha1.DynamicWeightByAvailableReplicas:
	default:
		return division{}, fmt.Errorf("weightPreference.dynamicWeight %q: unknown, want %s or empty",
			pref.DynamicWeight, v1alpha1.DynamicWeightByAvailableReplicas)
	}
	switch s.ReplicaDivisionPreference {
	case "", v1alpha1.ReplicaDivisionPreferenceWeighted:
		if pref.DynamicWeight == "" {
			return compileStaticWeights(pref.StaticWeightList)
		}
		// Karmada ignores staticWeightList when dynamicWeight is set.
		return division{kind: divideDynamicWeight}, nil
	case v1alpha1.ReplicaDivisionPreferenceAggregated:
		return division{kind: divideAggregated}, nil
	default:
		return division{}, fmt.Errorf("replicaDivisionPreference %q: unknown, want %s or %s",
			s.ReplicaDivisionPreference, v1alpha1.ReplicaDivisionPreferenceWeighted, v1alpha1.ReplicaDivisionPreferenceAggregated)
	}
}

func compileStaticWeights(list []v1alpha1.StaticClusterWeight) (division, error) {
	d := division{kind: divideStaticWeight, rules: make([]weightRule, len(list))}
	for i := range list {
		w := &list[i]
		if w.Weight < 0 {
			return division{}, fmt.Errorf("weightPreference.staticWeightList[%d].weight %d: must not be negative", i, w.Weight)
		}
		m, err := compileAffinity(&w.TargetCluster)
		if err != nil {
			return division{}, fmt.Errorf("weightPreference.staticWeightList[%d].targetCluster: %w", i, err)
		}
		d.rules[i] = weightRule{matcher: m, weight: w.Weight}
	}
	return d, nil
}

// divide assigns the replicas of in to clusters (sorted by name), keeping
// the order.
func (d *division) divide(in *Input, room *roomCache, clusters []*v1alpha1.Cluster) ([]v1alpha1.TargetCluster, error) {
	switch {
	case in.Replicas == 0:
		return every(clusters, 0), nil
	case d.kind == divideDuplicated:
		return every(clusters, in.Replicas), nil
	case d.kind == divideDynamicWeight, d.kind == divideAggregated:
		return divideByCapacity(capacityRequest{
			replicas: int64(in.Replicas),
			previous: in.Previous,
			room:     room,
			fresh:    in.Fresh,
			ties:     tiesFor(in.TemplateUID),
		}, d.kind == divideAggregated, clusters)
	}
	parties := d.weigh(clusters)
	apportion(int64(in.Replicas), parties, tiesFor(in.TemplateUID))
	targets := make([]v1alpha1.TargetCluster, 0, len(parties))
	for _, p := range parties {
		// A cluster without replicas would get an empty Work: leave it out.
		if p.seats > 0 {
			targets = append(targets, v1alpha1.TargetCluster{Name: p.name, Replicas: int32(p.seats)})
		}
	}
	return targets, nil
}

func every(clusters []*v1alpha1.Cluster, replicas int32) []v1alpha1.TargetCluster {
	targets := make([]v1alpha1.TargetCluster, len(clusters))
	for i, c := range clusters {
		targets[i] = v1alpha1.TargetCluster{Name: c.Name, Replicas: replicas}
	}
	return targets
}

// weigh gives every cluster the largest weight of the rules that match it,
// 0 when none does. When no cluster gets a positive weight, all weigh 1
// (as in Karmada): a policy whose rules match none of the fitting clusters
// still spreads its replicas instead of failing.
func (d *division) weigh(clusters []*v1alpha1.Cluster) []party {
	parties := make([]party, len(clusters))
	positive := false
	for i, c := range clusters {
		var w int64
		for j := range d.rules {
			r := &d.rules[j]
			if r.weight > w && r.matcher.matches(c) {
				w = r.weight
			}
		}
		parties[i] = party{name: c.Name, weight: w}
		positive = positive || w > 0
	}
	if !positive {
		for i := range parties {
			parties[i].weight = 1
		}
	}
	return parties
}
