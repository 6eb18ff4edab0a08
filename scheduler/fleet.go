package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// maxFleetMemos bounds what one Fleet remembers per requirements and per
// kind: beyond it, schedules compute room and served kinds as they would
// without a Fleet.
const maxFleetMemos = 256

// Fleet is the clusters many schedules look at, prepared once: sorted by
// name and checked, with each cluster's room per replica requirements and
// the clusters that do not serve a kind remembered on first use. Schedules
// that share a Fleet skip the sort and, for requirements and kinds seen
// before, the walk over every cluster's resource summary and APIs; the hub
// builds one per change of its clusters and shares it between workers.
//
// A Fleet is safe for concurrent use. Neither it nor its clusters may be
// modified once built: what it remembers would no longer be true.
type Fleet struct {
	clusters []*v1alpha1.Cluster // sorted by name
	index    map[*v1alpha1.Cluster]int

	mu       sync.Mutex
	rooms    map[string]*roomTable     // by requirementsKey; guarded by mu
	unserved map[string]*unservedTable // by apiVersion + " " + kind; guarded by mu
	matches  map[string]*matchTable    // by affinityMatcher.key; guarded by mu
}

// roomTable is AvailableReplicas of every cluster of a Fleet, by index,
// for one replica requirements; computed once, by whoever asks first.
type roomTable struct {
	once  sync.Once
	rooms []int64
}

// unservedTable maps the clusters of a Fleet that report their APIs
// without one kind to why they are excluded; computed once.
type unservedTable struct {
	once     sync.Once
	excluded map[string]string
}

// matchTable is whether each cluster of a Fleet, by index, matches one
// cluster affinity; computed once.
type matchTable struct {
	once    sync.Once
	matched []bool
}

// NewFleet prepares clusters (any order) for many schedules. A nil
// cluster or a name listed twice is an error, as in [Schedule].
func NewFleet(clusters []*v1alpha1.Cluster) (*Fleet, error) {
	sorted, err := sortedClusters(clusters)
	if err != nil {
		return nil, err
	}
	index := make(map[*v1alpha1.Cluster]int, len(sorted))
	for i, c := range sorted {
		index[c] = i
	}
	return &Fleet{clusters: sorted, index: index, rooms: map[string]*roomTable{}, unserved: map[string]*unservedTable{}, matches: map[string]*matchTable{}}, nil
}

// Len is the number of clusters.
func (f *Fleet) Len() int { return len(f.clusters) }

// roomsFor returns the room of every cluster, by index, for req, or nil
// when the Fleet remembers too many requirements already.
func (f *Fleet) roomsFor(req *v1alpha1.ReplicaRequirements) []int64 {
	key := requirementsKey(req)
	f.mu.Lock()
	t, ok := f.rooms[key]
	if !ok && len(f.rooms) < maxFleetMemos {
		t = &roomTable{}
		f.rooms[key] = t
	}
	f.mu.Unlock()
	if t == nil {
		return nil
	}
	t.once.Do(func() {
		t.rooms = make([]int64, len(f.clusters))
		for i, c := range f.clusters {
			t.rooms[i] = AvailableReplicas(c, req)
		}
	})
	return t.rooms
}

// unservedBy returns the clusters that do not serve apiVersion's kind,
// to why, as exclusions does; the map is shared and must not be changed.
func (f *Fleet) unservedBy(apiVersion, kind string) map[string]string {
	key := apiVersion + " " + kind
	f.mu.Lock()
	t, ok := f.unserved[key]
	if !ok && len(f.unserved) < maxFleetMemos {
		t = &unservedTable{}
		f.unserved[key] = t
	}
	f.mu.Unlock()
	if t == nil {
		return unserved(apiVersion, kind, f.clusters)
	}
	t.once.Do(func() { t.excluded = unserved(apiVersion, kind, f.clusters) })
	return t.excluded
}

// requirementsKey is the same string for requirements that request the
// same quantities, written the same way; requirements written
// differently (500m, 0.5) merely get two entries.
func requirementsKey(req *v1alpha1.ReplicaRequirements) string {
	if req == nil || len(req.ResourceRequest) == 0 {
		return ""
	}
	names := make([]string, 0, len(req.ResourceRequest))
	for name := range req.ResourceRequest {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := req.ResourceRequest[corev1.ResourceName(name)]
		fmt.Fprintf(&b, "%s=%s;", name, q.String())
	}
	return b.String()
}

// matching returns whether each cluster, by index, matches m, or nil when
// m has no key or the Fleet remembers too many affinities already.
func (f *Fleet) matching(m *affinityMatcher) []bool {
	if m.key == "" {
		return nil
	}
	f.mu.Lock()
	t, ok := f.matches[m.key]
	if !ok && len(f.matches) < maxFleetMemos {
		t = &matchTable{}
		f.matches[m.key] = t
	}
	f.mu.Unlock()
	if t == nil {
		return nil
	}
	t.once.Do(func() {
		t.matched = make([]bool, len(f.clusters))
		for i, c := range f.clusters {
			t.matched[i] = m.matches(c)
		}
	})
	return t.matched
}
