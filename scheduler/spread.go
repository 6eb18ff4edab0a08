package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Scores rank clusters, and through them spread groups.
const (
	// scoreLocality is for a cluster the binding already has replicas on.
	scoreLocality = 100
	// scoreAffinity is for a cluster the affinity used lists by name.
	scoreAffinity = 10
	// scorePreferNoSchedule is taken off for each PreferNoSchedule taint
	// the placement does not tolerate: such a cluster is chosen last among
	// equals, but still before a cluster without the binding's replicas.
	scorePreferNoSchedule = 1
)

// scorer scores clusters for one binding.
type scorer struct {
	placed      map[string]bool // in Previous with replicas > 0
	listed      map[string]bool // clusterNames of the affinity used; nil: none
	tolerations []corev1.Toleration
	// tier is the overflow tier of each cluster (0: primary); nil: the
	// group has no overflow tiers.
	tier map[string]int
}

func newScorer(previous []v1alpha1.TargetCluster, m *affinityMatcher, tolerations []corev1.Toleration) scorer {
	s := scorer{placed: map[string]bool{}, listed: m.names, tolerations: tolerations}
	for _, t := range previous {
		if t.Replicas > 0 {
			s.placed[t.Name] = true
		}
	}
	return s
}

// score is locality (100 when the binding has replicas there) plus
// affinity (10 when the affinity used lists the cluster by name) minus 1
// for each untolerated PreferNoSchedule taint.
func (s *scorer) score(c *v1alpha1.Cluster) int64 {
	var n int64
	if s.placed[c.Name] {
		n += scoreLocality
	}
	if s.listed[c.Name] {
		n += scoreAffinity
	}
	for i := range c.Spec.Taints {
		t := &c.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !Tolerates(s.tolerations, t) {
			n -= scorePreferNoSchedule
		}
	}
	return n
}

// spreadRule is one compiled spread constraint.
type spreadRule struct {
	by       string // "region", "label team": for messages
	get      func(*v1alpha1.Cluster) string
	min, max int // min ≥ 1; max 0: no limit
}

// compileSpreads checks the spread constraints; errors name the field.
func compileSpreads(cs []v1alpha1.SpreadConstraint) ([]spreadRule, error) {
	rules := make([]spreadRule, 0, len(cs))
	for i, c := range cs {
		r, err := compileSpread(c)
		if err != nil {
			return nil, fmt.Errorf("placement.spreadConstraints[%d]: %w", i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func compileSpread(c v1alpha1.SpreadConstraint) (spreadRule, error) {
	var r spreadRule
	switch {
	case c.SpreadByField != "" && c.SpreadByLabel != "":
		return r, errors.New("spreadByField and spreadByLabel are exclusive")
	case c.SpreadByLabel != "":
		key := c.SpreadByLabel
		r.by, r.get = "label "+key, func(cl *v1alpha1.Cluster) string { return cl.Labels[key] }
	case c.SpreadByField == v1alpha1.SpreadByFieldCluster:
		r.by, r.get = "cluster", func(cl *v1alpha1.Cluster) string { return cl.Name }
	case c.SpreadByField == v1alpha1.SpreadByFieldRegion:
		r.by, r.get = "region", func(cl *v1alpha1.Cluster) string { return cl.Spec.Region }
	case c.SpreadByField == v1alpha1.SpreadByFieldZone:
		r.by, r.get = "zone", func(cl *v1alpha1.Cluster) string { return cl.Spec.Zone }
	case c.SpreadByField == v1alpha1.SpreadByFieldProvider:
		r.by, r.get = "provider", func(cl *v1alpha1.Cluster) string { return cl.Spec.Provider }
	case c.SpreadByField == "":
		return r, errors.New("one of spreadByField and spreadByLabel is required")
	default:
		return r, fmt.Errorf("spreadByField %q: unknown, want %s, %s, %s or %s", c.SpreadByField,
			v1alpha1.SpreadByFieldCluster, v1alpha1.SpreadByFieldRegion, v1alpha1.SpreadByFieldZone, v1alpha1.SpreadByFieldProvider)
	}
	if c.MinGroups < 0 || c.MaxGroups < 0 {
		return r, fmt.Errorf("minGroups %d, maxGroups %d: must not be negative", c.MinGroups, c.MaxGroups)
	}
	if c.MaxGroups > 0 && c.MaxGroups < c.MinGroups {
		return r, fmt.Errorf("maxGroups %d: less than minGroups %d", c.MaxGroups, c.MinGroups)
	}
	// At least one group: a spread that selects nothing is not a placement.
	r.min, r.max = max(c.MinGroups, 1), c.MaxGroups
	return r, nil
}

// spreadGroup is the clusters sharing one value of a spread rule.
type spreadGroup struct {
	name     string
	clusters []*v1alpha1.Cluster
	tier     int // the first overflow tier among its clusters
	score    int64
	capacity int64
}

// spread applies rules in order to clusters (sorted by name), each
// narrowing the clusters the previous one chose, and returns the chosen
// ones, still sorted by name.
func spread(rules []spreadRule, in *Input, s *scorer, room *roomCache, clusters []*v1alpha1.Cluster) ([]*v1alpha1.Cluster, error) {
	for i := range rules {
		var err error
		if clusters, err = spreadOne(&rules[i], in, s, room, clusters); err != nil {
			return nil, err
		}
	}
	return clusters, nil
}

func spreadOne(r *spreadRule, in *Input, s *scorer, room *roomCache, clusters []*v1alpha1.Cluster) ([]*v1alpha1.Cluster, error) {
	var groups []spreadGroup
	index := map[string]int{}
	grouped := 0
	for _, c := range clusters {
		v := r.get(c)
		if v == "" {
			continue // no value: not in any group
		}
		grouped++
		i, ok := index[v]
		if !ok {
			i = len(groups)
			index[v] = i
			groups = append(groups, spreadGroup{name: v, tier: s.tier[c.Name]})
		}
		g := &groups[i]
		g.clusters = append(g.clusters, c)
		g.tier = min(g.tier, s.tier[c.Name])
		g.score += s.score(c)
	}
	if len(groups) < r.min {
		return nil, newSpreadError(r, groups)
	}
	if r.max == 0 || len(groups) <= r.max {
		if grouped == len(clusters) {
			return clusters, nil // every group, every cluster
		}
		return mergeGroups(groups, len(clusters)), nil
	}
	// Capacity only breaks ties of score: count it only when it can matter.
	if in.Replicas > 0 {
		for i := range groups {
			for _, c := range groups[i].clusters {
				groups[i].capacity = addSat(groups[i].capacity, room.remember(c, len(clusters)))
			}
		}
	}
	// An earlier overflow tier first: its clusters are to be filled first.
	slices.SortFunc(groups, func(a, b spreadGroup) int {
		return cmp.Or(cmp.Compare(a.tier, b.tier), cmp.Compare(b.score, a.score), cmp.Compare(b.capacity, a.capacity), strings.Compare(a.name, b.name))
	})
	return mergeGroups(groups[:r.max], len(clusters)), nil
}

// mergeGroups returns the clusters of groups sorted by name.
func mergeGroups(groups []spreadGroup, hint int) []*v1alpha1.Cluster {
	out := make([]*v1alpha1.Cluster, 0, hint)
	for i := range groups {
		out = append(out, groups[i].clusters...)
	}
	slices.SortFunc(out, func(a, b *v1alpha1.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// newSpreadError reports too few groups: "spread by region needs at least
// 2 groups, 1 available (eu)".
func newSpreadError(r *spreadRule, groups []spreadGroup) *UnschedulableError {
	names := make([]string, len(groups))
	for i := range groups {
		names[i] = groups[i].name
	}
	slices.Sort(names)
	list := strings.Join(names, ", ")
	if len(names) > maxRoomListed {
		list = fmt.Sprintf("%s and %d more", strings.Join(names[:maxRoomListed], ", "), len(names)-maxRoomListed)
	}
	return &UnschedulableError{
		Reason:  v1alpha1.ReasonNoClusterFit,
		Message: fmt.Sprintf("spread by %s needs at least %d groups, %d available (%s)", r.by, r.min, len(groups), list),
	}
}
