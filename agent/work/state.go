package work

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/protocol"
)

// workState is what the engine knows of one Work. The engine's mutex guards
// it; the one reconcile of the Work in progress owns what its operation
// holds.
type workState struct {
	// desired is the last WorkUpsert; deleting is set by a WorkDelete after
	// it. seq counts both, doneSeq is the seq last reconciled to the end,
	// and cancel ends the reconcile in progress.
	desired  *protocol.WorkUpsert
	deleting bool
	// fence is set when the Work is to be fenced (see fence.go), and stays
	// set until the next upsert or delete: while it is, nothing applies
	// the Work, retries included.
	fence   bool
	seq     uint64
	doneSeq uint64
	cancel  context.CancelFunc
	// asked holds the UIDs of the objects the current delete asked to go.
	asked map[identity]types.UID

	// record mirrors the Work's record in the member cluster; nil if none.
	record *record
	// current is the manifest set status reports on, nil if none.
	current *manifestSet
	// reported is what the hub was last told, at reportedAt.
	reported   []protocol.ManifestResult
	reportedAt time.Time
}

// manifestSet is one generation of a Work's manifests as the engine last
// applied them. It is never modified once built.
type manifestSet struct {
	generation int64
	entries    []manifestEntry
	// statePaths are the Work's JSONPath templates whose values are
	// reported with the first manifest's status.
	statePaths []string
}

// statePathsOf are the templates evaluated on manifest i's object: the
// Work's, on the first manifest (the workload the hub reads state of).
func (s *manifestSet) statePathsOf(i int) []string {
	if i != 0 {
		return nil
	}
	return s.statePaths
}

// manifestEntry is one manifest: its identity and, if applying it failed,
// why (then health is not watched).
type manifestEntry struct {
	result protocol.ManifestResult
	failed bool
}

// recordedSet is the manifest set of a record's generation, nil for a Work
// never applied successfully.
func recordedSet(r *record) *manifestSet {
	if r.Generation == 0 {
		return nil
	}
	set := &manifestSet{generation: r.Generation, statePaths: r.StatePaths}
	for i, ref := range r.Objects {
		set.entries = append(set.entries, manifestEntry{result: ref.result(i)})
	}
	return set
}

// refOf is the object a manifest result names.
func refOf(r protocol.ManifestResult) objectRef {
	return objectRef{Group: r.Group, Version: r.Version, Kind: r.Kind, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// state returns the state of work, creating it. Call with e.mu held.
func (e *Engine) state(work string) *workState {
	st, ok := e.works[work]
	if !ok {
		st = &workState{}
		e.works[work] = st
	}
	return st
}

// setRecord notes that the Work's record in the cluster is now r (nil:
// deleted). A record with objects to fence may bring a fencing deadline.
func (e *Engine) setRecord(work string, r *record) {
	e.mu.Lock()
	e.state(work).record = r
	e.mu.Unlock()
	if r != nil && r.StopAfterSeconds > 0 {
		e.wakeFencing()
	}
}
