package work

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/internal/ellipsis"
	"github.com/flotilla-io/flotilla/protocol"
)

// applyResult is the outcome of one attempt at applying a generation.
type applyResult struct {
	answer *protocol.WorkApplied
	set    *manifestSet
	took   time.Duration
	// refusedOnly: every manifest that failed was refused by the member
	// policy. Trying again changes nothing until the policy or the Work
	// does, so the Work is not retried.
	refusedOnly bool
}

// applyRun is one attempt at applying a generation of a Work. Every object
// is recorded before it is applied, so that a delete finds it even if the
// agent dies right after.
type applyRun struct {
	e          *Engine
	op         *operation
	manifests  []manifest
	record     *record
	refs       []*objectRef // by ordinal, once mapped
	results    []protocol.ManifestResult
	failed     []bool
	refused    []bool          // by the member policy
	namespaces map[string]bool // known to exist
}

// apply applies op's generation: Namespaces, then CRDs, then the rest; then,
// if every manifest applied, it prunes what the generation dropped and
// records the generation as applied.
func (e *Engine) apply(op *operation) applyResult {
	start := time.Now()
	u := op.upsert
	a := &applyRun{e: e, op: op, manifests: decodeManifests(u.Manifests),
		refs: make([]*objectRef, len(u.Manifests)), results: make([]protocol.ManifestResult, len(u.Manifests)),
		failed: make([]bool, len(u.Manifests)), refused: make([]bool, len(u.Manifests)), namespaces: map[string]bool{}}
	a.record = &record{Binding: u.Binding}
	if op.record != nil {
		a.record = op.record
	}
	early, late := phases(a.manifests)
	a.applyPhase(early)
	a.waitForCRDs(early)
	a.applyPhase(late)
	answer := &protocol.WorkApplied{Name: op.work, Generation: u.Generation, Manifests: a.results}
	answer.Message = a.failureSummary()
	if slices.Contains(a.refused, true) {
		answer.Reason = protocol.ReasonRefusedByMemberPolicy
	}
	if answer.Message == "" {
		answer.Message = a.finish()
	}
	answer.Applied = answer.Message == ""
	return applyResult{answer: answer, set: a.manifestSet(), took: time.Since(start), refusedOnly: a.refusedOnly()}
}

// refusedOnly says whether some manifest failed and every one that did was
// refused by the member policy.
func (a *applyRun) refusedOnly() bool {
	someFailed := false
	for i, failed := range a.failed {
		if failed && !a.refused[i] {
			return false
		}
		someFailed = someFailed || failed
	}
	return someFailed
}

// applyPhase maps, records and applies the manifests at ordinals.
func (a *applyRun) applyPhase(ordinals []int) {
	var refs []objectRef
	var mapped []int
	for _, i := range ordinals {
		ref, err := a.resolve(a.manifests[i])
		if err == nil {
			err = a.e.admit(ref) // before anything is recorded or written
		}
		if err != nil {
			a.fail(i, err)
			continue
		}
		a.refs[i] = &ref
		a.results[i] = ref.result(i)
		refs, mapped = append(refs, ref), append(mapped, i)
	}
	if err := a.remember(refs); err != nil {
		for _, i := range mapped {
			a.fail(i, fmt.Errorf("%s: not applied: %w", a.refs[i], err))
		}
		return
	}
	for _, i := range mapped {
		if err := a.applyOne(a.manifests[i], *a.refs[i]); err != nil {
			a.fail(i, err)
		}
	}
}

// resolve maps a manifest to its resource and namespace.
func (a *applyRun) resolve(m manifest) (objectRef, error) {
	if m.err != nil {
		return objectRef{}, m.err
	}
	gvk := m.obj.GroupVersionKind()
	mapping, err := a.e.mapping(gvk)
	if err != nil {
		return objectRef{}, fmt.Errorf("%s: the cluster does not serve this kind: %w", describe(m.obj), err)
	}
	ref := objectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Resource: mapping.Resource.Resource, Name: m.obj.GetName()}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ref.Namespace = m.obj.GetNamespace()
		if ref.Namespace == "" {
			ref.Namespace = metav1.NamespaceDefault
		}
	}
	return ref, nil
}

// remember records refs as the Work's before they are applied, with the
// generation's fencing setting; refs it already holds cost no write.
func (a *applyRun) remember(refs []objectRef) error {
	fresh := subtract(refs, a.record.all())
	after := a.op.upsert.StopAfterSeconds
	if len(fresh) == 0 && (a.record.StopAfterSeconds == after || len(a.record.all()) == 0) {
		return nil
	}
	next := *a.record
	next.Binding, next.StopAfterSeconds = a.op.upsert.Binding, after
	next.Pending = append(append([]objectRef(nil), next.Pending...), fresh...)
	if err := a.e.records.save(a.op.ctx, a.op.work, &next); err != nil {
		return err
	}
	a.record = &next
	a.e.setRecord(a.op.work, &next)
	return nil
}

// applyOne server-side applies one manifest, unless someone else's object
// has its name.
func (a *applyRun) applyOne(m manifest, ref objectRef) error {
	ctx := a.op.ctx
	if ref.Namespace != "" && !a.namespaces[ref.Namespace] {
		if err := ensureNamespace(ctx, a.e.kube, ref.Namespace, a.e.cfg.Policy.NamespaceLabels()); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		a.namespaces[ref.Namespace] = true
	}
	if _, err := a.e.owned(ctx, ref, a.op.work); err != nil {
		return err
	}
	obj := prepare(m.obj, ref.Namespace, a.op.work, a.op.upsert.Binding)
	if ref.gvk().GroupKind() == namespaceKind {
		a.e.withPolicyLabels(obj)
	}
	applied, err := a.e.resource(ref).Apply(ctx, ref.Name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("%s: apply: %w", ref, err)
	}
	a.e.watch.ensure(ref)
	r := &a.results[m.ordinal]
	r.Health, r.Message = health(applied)
	r.Status = keyStatus(applied)
	if m.ordinal == 0 {
		r.StateValues = stateValues(applied, a.op.upsert.StatePaths)
	}
	return nil
}

// fail marks manifest i as failed because of err.
func (a *applyRun) fail(i int, err error) {
	a.failed[i], a.refused[i] = true, isRefused(err)
	r := &a.results[i]
	if a.refs[i] == nil {
		*r = manifestIdentity(a.manifests[i])
	}
	r.Health, r.Message, r.Status, r.StateValues = protocol.HealthUnknown, ellipsis.Cut(err.Error(), maxMessage), nil, nil
}

// manifestIdentity names a manifest that could not be mapped as far as it
// can.
func manifestIdentity(m manifest) protocol.ManifestResult {
	r := protocol.ManifestResult{Ordinal: m.ordinal}
	if m.obj != nil {
		gvk := m.obj.GroupVersionKind()
		r.Group, r.Version, r.Kind, r.Namespace, r.Name = gvk.Group, gvk.Version, gvk.Kind, m.obj.GetNamespace(), m.obj.GetName()
	}
	return r
}

// finish ends the fencing of a fenced Work, prunes the objects the
// generation dropped and records it as applied (and no longer fenced). It
// returns what went wrong, or "".
func (a *applyRun) finish() string {
	applied := make([]objectRef, len(a.refs))
	for i, ref := range a.refs {
		applied[i] = *ref // every manifest applied
	}
	if a.record.fenced() {
		// The hub sent the Work again: the workloads run as it says.
		if err := a.e.unfence(a.op, applied); err != nil {
			return ellipsis.Cut("restore after fencing: "+err.Error(), maxMessage)
		}
	}
	if err := a.e.prune(a.op, subtract(a.record.all(), applied)); err != nil {
		return ellipsis.Cut("prune: "+err.Error(), maxMessage)
	}
	done := &record{Generation: a.op.upsert.Generation, Binding: a.op.upsert.Binding, Objects: applied,
		StopAfterSeconds: a.op.upsert.StopAfterSeconds, StatePaths: a.op.upsert.StatePaths}
	if err := a.e.records.save(a.op.ctx, a.op.work, done); err != nil {
		return ellipsis.Cut(err.Error(), maxMessage)
	}
	a.e.setRecord(a.op.work, done)
	return ""
}

// manifestSet is what status watches after this attempt.
func (a *applyRun) manifestSet() *manifestSet {
	set := &manifestSet{generation: a.op.upsert.Generation, statePaths: a.op.upsert.StatePaths}
	for i, r := range a.results {
		set.entries = append(set.entries, manifestEntry{result: r, failed: a.failed[i]})
	}
	return set
}
