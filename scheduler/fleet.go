package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// maxFleetMemos bounds what one Fleet remembers per requirements, per
// kind and per affinity: beyond it, schedules compute those as they would
// without a Fleet.
const maxFleetMemos = 256

// Fleet is the clusters many schedules look at, prepared once: sorted by
// name and checked, with each cluster's room per replica requirements, the
// clusters that do not serve a kind and each affinity's matches remembered
// on first use. Schedules that share a Fleet skip the sort and, for
// requirements, kinds and affinities seen before, the walk over every
// cluster; the hub builds one per change of its clusters and shares it
// between workers.
//
// A Fleet is safe for concurrent use. Neither it nor its clusters may be
// modified once built: what it remembers would no longer be true.
type Fleet struct {
	clusters []*v1alpha1.Cluster // sorted by name
	index    map[*v1alpha1.Cluster]int

	rooms    memo[[]int64]           // by requirementsKey: AvailableReplicas by index
	unserved memo[map[string]string] // by apiVersion + " " + kind: as unserved says
	matches  memo[[]bool]            // by affinityMatcher.key: matches by index
}

// memo remembers values by key, each computed once by whoever asks first,
// and at most maxFleetMemos of them.
type memo[T any] struct {
	mu      sync.Mutex
	entries map[string]*memoEntry[T] // guarded by mu
}

type memoEntry[T any] struct {
	once  sync.Once
	value T
}

// get returns key's value, computing it if it is new; false, without
// computing, when key is new and the memo is full.
func (m *memo[T]) get(key string, compute func() T) (T, bool) {
	m.mu.Lock()
	e, ok := m.entries[key]
	if !ok && len(m.entries) < maxFleetMemos {
		if m.entries == nil {
			m.entries = map[string]*memoEntry[T]{}
		}
		e = &memoEntry[T]{}
		m.entries[key] = e
	}
	m.mu.Unlock()
	if e == nil {
		var zero T
		return zero, false
	}
	e.once.Do(func() { e.value = compute() })
	return e.value, true
}

// len is how many keys the memo holds.
func (m *memo[T]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
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
	return &Fleet{clusters: sorted, index: index}, nil
}

// roomsFor returns the room of every cluster, by index, for req, or nil
// when the Fleet remembers too many requirements already.
func (f *Fleet) roomsFor(req *v1alpha1.ReplicaRequirements) []int64 {
	rooms, _ := f.rooms.get(requirementsKey(req), func() []int64 {
		rooms := make([]int64, len(f.clusters))
		for i, c := range f.clusters {
			rooms[i] = AvailableReplicas(c, req)
		}
		return rooms
	})
	return rooms
}

// unservedBy returns the clusters that do not serve apiVersion's kind,
// to why, as exclusions does; the map may be shared and must not be
// changed.
func (f *Fleet) unservedBy(apiVersion, kind string) map[string]string {
	compute := func() map[string]string { return unserved(apiVersion, kind, f.clusters) }
	if out, ok := f.unserved.get(apiVersion+" "+kind, compute); ok {
		return out
	}
	return compute()
}

// matching returns whether each cluster, by index, matches m, or nil when
// m has no key or the Fleet remembers too many affinities already.
func (f *Fleet) matching(m *affinityMatcher) []bool {
	if m.key == "" {
		return nil
	}
	matched, _ := f.matches.get(m.key, func() []bool {
		matched := make([]bool, len(f.clusters))
		for i, c := range f.clusters {
			matched[i] = m.matches(c)
		}
		return matched
	})
	return matched
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
