package work

import (
	"bytes"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/protocol"
)

// Statuses returns the current state of every Work the engine has
// manifests for, sorted by name: a new session sends them after the
// inventory, since the hub may have missed changes while disconnected.
// Empty until Loaded.
func (e *Engine) Statuses() []*protocol.WorkStatus {
	select {
	case <-e.loaded:
	default:
		return nil
	}
	e.mu.Lock()
	sets := map[string]*manifestSet{}
	for name, st := range e.works {
		if st.current != nil {
			sets[name] = st.current
		}
	}
	e.mu.Unlock()
	var out []*protocol.WorkStatus
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		results := e.observe(name, sets[name])
		e.noteReported(name, sets[name], results)
		out = append(out, &protocol.WorkStatus{Name: name, Generation: sets[name].generation, Manifests: results})
	}
	return out
}

// processStatus handles the next Work whose objects changed; false means
// the queue shut down.
func (e *Engine) processStatus() bool {
	work, shutdown := e.statusQ.Get()
	if shutdown {
		return false
	}
	defer e.statusQ.Done(work)
	e.refreshStatus(work)
	return true
}

// refreshStatus sends a WorkStatus if the health or key status of the
// Work's objects changed since the hub was last told: at most once per
// StatusInterval, and once per ProgressInterval when only the key status
// or a health message moved (a rollout's replica counts) while every
// object's health stayed as reported. A change sooner than that is looked at when it ends. Each
// WorkStatus costs the hub a write of the Work's status.
func (e *Engine) refreshStatus(work string) {
	e.mu.Lock()
	st := e.works[work]
	if st == nil || st.current == nil {
		e.mu.Unlock()
		return
	}
	set := st.current
	e.mu.Unlock()

	results := e.observe(work, set)
	e.mu.Lock()
	defer e.mu.Unlock()
	if st != e.works[work] || st.current != set || sameResults(st.reported, results) {
		return // changed meanwhile (that queued another look), or nothing new
	}
	interval := e.cfg.StatusInterval
	if progressOnly(st.reported, results) {
		interval = max(interval, e.cfg.ProgressInterval)
	}
	if wait := time.Until(st.reportedAt.Add(interval)); wait > 0 {
		e.statusQ.AddAfter(work, wait)
		return
	}
	st.reported, st.reportedAt = results, time.Now()
	e.feeds.emit(&protocol.WorkStatus{Name: work, Generation: set.generation, Manifests: results})
}

// progressOnly reports whether b differs from a in the key status and
// the health messages alone ("Available: 0/3"): the same objects with the
// same health and state values.
func progressOnly(a, b []protocol.ManifestResult) bool {
	return slices.EqualFunc(a, b, func(x, y protocol.ManifestResult) bool {
		x.Message, y.Message = "", ""
		return maps.Equal(x.StateValues, y.StateValues) && withoutStatus(x) == withoutStatus(y)
	})
}

// noteReported records that the hub was told results for set.
func (e *Engine) noteReported(work string, set *manifestSet, results []protocol.ManifestResult) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.works[work]; st != nil && st.current == set {
		st.reported, st.reportedAt = results, time.Now()
	}
}

// observe computes the results of a manifest set from the watch caches.
// Manifests that failed to apply keep their failure.
func (e *Engine) observe(work string, set *manifestSet) []protocol.ManifestResult {
	out := make([]protocol.ManifestResult, len(set.entries))
	for i, entry := range set.entries {
		out[i] = entry.result
		if !entry.failed {
			e.observeObject(work, &out[i], set.statePathsOf(i))
		}
	}
	return out
}

// observeObject fills r's health, key status and state values (of paths)
// from the watch cache.
func (e *Engine) observeObject(work string, r *protocol.ManifestResult, paths []string) {
	ref := refOf(*r)
	obj, synced := e.watch.get(ref)
	r.Status, r.StateValues = nil, nil
	switch {
	case obj == nil && !synced:
		r.Health, r.Message = protocol.HealthUnknown, "waiting for the watch of "+ref.Resource
	case obj == nil:
		r.Health, r.Message = protocol.HealthUnknown, "not found"
	case obj.GetLabels()[LabelWork] != work:
		r.Health, r.Message = protocol.HealthUnknown, ref.String()+" "+errNotManaged.Error()
	default:
		r.Health, r.Message = health(obj)
		r.Status, r.StateValues = keyStatus(obj), stateValues(obj, paths)
	}
}

// sameResults reports whether two result lists say the same.
func sameResults(a, b []protocol.ManifestResult) bool {
	return slices.EqualFunc(a, b, func(x, y protocol.ManifestResult) bool {
		return bytes.Equal(x.Status, y.Status) && maps.Equal(x.StateValues, y.StateValues) && withoutStatus(x) == withoutStatus(y)
	})
}

// comparableResult is a ManifestResult without its Status bytes and
// state values.
type comparableResult struct {
	ordinal                                                 int
	group, version, kind, resource, namespace, name, health string
	message                                                 string
}

func withoutStatus(r protocol.ManifestResult) comparableResult {
	return comparableResult{r.Ordinal, r.Group, r.Version, r.Kind, r.Resource, r.Namespace, r.Name, r.Health, r.Message}
}

// objectChanged is told by the watches that an object of work changed.
func (e *Engine) objectChanged(work string) {
	e.statusQ.Add(work)
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.works[work]; st != nil && st.deleting {
		e.queue.Add(work) // an object may be gone: check now, not at the next backoff
	}
}

// resourceSynced is told that the watch of gvr has filled its cache: the
// Works with objects of it get a fresh look.
func (e *Engine) resourceSynced(gvr schema.GroupVersionResource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, st := range e.works {
		if st.current != nil && slices.ContainsFunc(st.current.entries, func(m manifestEntry) bool {
			return m.result.Resource == gvr.Resource && m.result.Group == gvr.Group
		}) {
			e.statusQ.Add(name)
		}
	}
}
