package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// Fencing: a Work whose upsert carries StopAfterSeconds is fenced when the
// agent has been cut off from the hub that long, counted from the last
// contact (the sending of the last lease renewal the hub acknowledged):
// its workloads are scaled to zero and its Jobs suspended, with a field
// manager of their own, and its record says so. It stays fenced, across
// agent restarts too, until the hub sends the Work again, which the hub
// does for every Work the inventory reports fenced; applying it takes the
// fields back and releases the fencing manager's.

// FencingFieldManager is the server-side apply field manager of fencing.
// It owns only the fields fencing sets, so the agent's own apply
// (FieldManager, forced) takes them back.
const FencingFieldManager = "flotilla-fencing"

// fenceSpecs are the kinds fencing stops and the spec fields that stop them.
// Other kinds (DaemonSets, bare Pods, custom resources) are not fenced.
var fenceSpecs = map[schema.GroupKind]map[string]any{
	{Group: "apps", Kind: "Deployment"}:        {"replicas": int64(0)},
	{Group: "apps", Kind: "StatefulSet"}:       {"replicas": int64(0)},
	{Group: "apps", Kind: "ReplicaSet"}:        {"replicas": int64(0)},
	{Group: "", Kind: "ReplicationController"}: {"replicas": int64(0)},
	jobKind:                           {"suspend": true},
	{Group: "batch", Kind: "CronJob"}: {"suspend": true},
}

// contactFloorIntervals: the agent never counts itself cut off before two
// renew intervals have passed without an acknowledged renewal, whatever
// StopAfterSeconds says: a quiet line between renewals is not a cut.
const contactFloorIntervals = 2

// Contact tells the engine that the hub answered at time at (on the
// engine's clock): the agent sent a lease renewal then that the hub
// acknowledged, or the hub welcomed it. renewInterval is how often the
// agent renews in this session. Fencing counts from the latest contact.
func (e *Engine) Contact(at time.Time, renewInterval time.Duration) {
	e.mu.Lock()
	if at.After(e.contact) {
		e.contact = at
	}
	floor := contactFloorIntervals * renewInterval
	earlier := floor < e.contactFloor
	e.contactFloor = floor
	e.mu.Unlock()
	if earlier {
		e.wakeFencing()
	}
}

// FenceSignal returns a channel that is closed the next time a Work that
// was not fenced is fenced. A session that receives it while connected ends, so that the
// next one's inventory reports the fenced Work and the hub restores it.
func (e *Engine) FenceSignal() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fenced
}

// wakeFencing makes the fencing loop look again at once.
func (e *Engine) wakeFencing() {
	select {
	case e.fenceWake <- struct{}{}:
	default:
	}
}

// stopAfter is the fencing setting the hub last gave the Work, 0 if none.
func (st *workState) stopAfter() time.Duration {
	seconds := int32(0)
	switch {
	case st.desired != nil:
		seconds = st.desired.StopAfterSeconds
	case st.record != nil:
		seconds = st.record.StopAfterSeconds
	}
	return time.Duration(seconds) * time.Second
}

// fenceLoop fences Works when their time comes. It alone decides when:
// one timer, set for the earliest deadline, and a wake-up when a deadline
// may have moved earlier (a contact only moves them later, so it needs
// none).
func (e *Engine) fenceLoop(ctx context.Context) {
	for {
		now := e.clock.Now()
		next := e.fenceDue(now)
		var timer clock.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = e.clock.NewTimer(next.Sub(now))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-fire:
		case <-e.fenceWake:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// fenceDue asks for every Work that is due to be fenced at now, and returns
// the next deadline, zero if there is none.
func (e *Engine) fenceDue(now time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var next time.Time
	for name, st := range e.works {
		after := st.stopAfter()
		if after <= 0 || st.fence || st.deleting || len(st.record.all()) == 0 {
			continue
		}
		deadline := e.contact.Add(max(after, e.contactFloor))
		if now.Before(deadline) {
			if next.IsZero() || deadline.Before(next) {
				next = deadline
			}
			continue
		}
		e.log.Warn("cut off from the hub: fencing the Work, its workloads go to zero until the hub sends it again",
			"work", name, "lastContact", e.contact, "cutOffFor", now.Sub(e.contact).Round(time.Millisecond), "stopAfter", after)
		e.requestLocked(name, func(st *workState) { st.fence = true })
	}
	return next
}

// fence stops the workloads of op's Work and records that it is fenced.
// Objects that are gone or not the Work's are left alone, as are Jobs
// that finished. It returns how many objects it stopped.
func (e *Engine) fence(op *operation) (int, error) {
	if op.record == nil {
		return 0, nil // nothing applied, nothing to stop
	}
	stopped := 0
	for _, ref := range op.record.all() {
		spec, ok := fenceSpecs[ref.gvk().GroupKind()]
		if !ok {
			continue
		}
		obj, err := e.owned(op.ctx, ref, op.work)
		switch {
		case errors.Is(err, errNotManaged):
			continue
		case err != nil:
			return stopped, err
		case obj == nil:
			continue
		case ref.gvk().GroupKind() == jobKind:
			if _, _, finished := jobHealth(obj); finished {
				continue
			}
		}
		if err := e.applyFencing(op.ctx, ref, spec); err != nil {
			return stopped, fmt.Errorf("%s: fence: %w", ref, err)
		}
		stopped++
	}
	fenced := *op.record
	fenced.FencedAt = e.clock.Now()
	if err := e.records.save(op.ctx, op.work, &fenced); err != nil {
		return stopped, err
	}
	e.setRecord(op.work, &fenced)
	return stopped, nil
}

// unfence releases what fencing set on refs, once the agent's own apply
// has taken back the fields the Work sets: a field only fencing held (a
// replicas the manifest leaves out) goes back to its default.
func (e *Engine) unfence(op *operation, refs []objectRef) error {
	for _, ref := range refs {
		if _, ok := fenceSpecs[ref.gvk().GroupKind()]; !ok {
			continue
		}
		if err := e.applyFencing(op.ctx, ref, nil); err != nil {
			return fmt.Errorf("%s: release the fencing: %w", ref, err)
		}
	}
	return nil
}

// applyFencing applies spec as the fencing field manager: the fields that
// stop the object, or none to release them.
func (e *Engine) applyFencing(ctx context.Context, ref objectRef, spec map[string]any) error {
	meta := map[string]any{"name": ref.Name}
	if ref.Namespace != "" {
		meta["namespace"] = ref.Namespace
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": meta}}
	obj.SetGroupVersionKind(ref.gvk())
	if spec != nil {
		obj.Object["spec"] = spec
	}
	_, err := e.resource(ref).Apply(ctx, ref.Name, obj, metav1.ApplyOptions{FieldManager: FencingFieldManager, Force: true})
	return err
}

// settleFence ends a fence operation: retried with backoff if it failed;
// else logged, and the sessions are told if the Work was not fenced yet.
func (e *Engine) settleFence(op *operation, stopped int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.settle(op, err == nil); st == nil {
		return
	}
	if err != nil {
		e.log.Warn("Work not fenced yet, retrying", "work", op.work, "stopped", stopped, "err", err)
		return
	}
	e.log.Warn("Work fenced: its workloads are stopped until the hub sends it again", "work", op.work, "stopped", stopped)
	if op.record != nil && !op.record.fenced() { // else every inventory since has said so
		close(e.fenced)
		e.fenced = make(chan struct{})
	}
}
