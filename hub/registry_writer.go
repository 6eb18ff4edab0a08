package hub

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
)

// finalFlushTimeout bounds the flush on shutdown; storeOpTimeout bounds
// each write round, so a stalled store fails requests instead of hanging
// them (what was not written is retried at the next flush).
const (
	finalFlushTimeout = 10 * time.Second
	storeOpTimeout    = 30 * time.Second
)

func withTimeout(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	f(ctx)
}

// runWriter is the only goroutine that writes clusters, leases and events:
// a flush every FlushInterval, and registrations and API updates in between.
//
// Leases have their own, longer interval: each is written at most once per
// LeaseFlushInterval however often its agent renews, so lease writes grow
// with the number of clusters, not with the heartbeat rate. Health is
// decided in memory; the stored renewTime only matters after a restart,
// which gets its own grace.
func (r *Registry) runWriter(ctx context.Context) {
	ticker := r.clock.NewTicker(r.cfg.FlushInterval)
	defer ticker.Stop()
	leaseTicker := r.clock.NewTicker(r.cfg.LeaseFlushInterval)
	defer leaseTicker.Stop()
	pruneTicker := r.clock.NewTicker(eventPruneInterval)
	defer pruneTicker.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			r.flushLeases(final)
			r.flush(final)
			cancel()
			return
		case <-ticker.C():
			withTimeout(ctx, r.flush)
		case <-r.flushSoon:
			withTimeout(ctx, r.flush)
		case <-leaseTicker.C():
			withTimeout(ctx, r.flushLeases)
		case <-pruneTicker.C():
			withTimeout(ctx, r.pruneEvents)
		case op := <-r.updates:
			withTimeout(ctx, func(ctx context.Context) {
				obj, err := r.apply(ctx, op)
				op.done <- updateOutcome{obj: obj, err: err}
			})
		}
	}
}

// eventPruneInterval is how often events older than EventTTL are deleted.
const eventPruneInterval = 10 * time.Minute

// pruneEvents deletes stored events older than the TTL, so events grow with
// recent activity, not with the hub's age.
func (r *Registry) pruneEvents(ctx context.Context) {
	if r.cfg.EventTTL <= 0 {
		return
	}
	events, _, err := r.events.List(ctx, eventNamespace)
	if err != nil {
		r.logger.Error("list events to prune", "err", err)
		return
	}
	cutoff := r.clock.Now().Add(-r.cfg.EventTTL)
	pruned := 0
	for _, ev := range events {
		if !ev.LastTimestamp.Time.Before(cutoff) {
			continue
		}
		if err := r.events.Delete(ctx, ev.Namespace, ev.Name); err != nil && !apierrors.IsNotFound(err) {
			r.logger.Error("prune event", "event", ev.Name, "err", err)
			return
		}
		pruned++
	}
	if pruned > 0 {
		r.countWrites(pruned, pruned)
		r.logger.Debug("pruned events", "count", pruned, "olderThan", r.cfg.EventTTL)
	}
}

// flush writes every changed cluster and pending event.
func (r *Registry) flush(ctx context.Context) {
	r.mu.Lock()
	clusters := make([]*v1alpha1.Cluster, 0, len(r.dirty))
	for name := range r.dirty {
		clusters = append(clusters, r.entries[name].obj.DeepCopy())
	}
	events := r.pending
	r.pending, r.inflight = nil, events
	clear(r.dirty)
	r.writing = len(clusters)
	r.mu.Unlock()

	for _, c := range clusters {
		r.writeCluster(ctx, c)
	}
	r.mu.Lock()
	r.writing = 0
	r.mu.Unlock()
	if len(events) == 0 {
		return
	}
	_, err := r.events.PutBatch(ctx, events)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight = nil
	if err != nil {
		r.logger.Error("store events", "count", len(events), "err", err)
		r.pending = append(events, r.pending...)
		return
	}
	r.countWrites(len(events), txnCount(len(events)))
}

func txnCount(objects int) int { return (objects + 127) / 128 }

func (r *Registry) countWrites(objects, txns int) {
	r.stats.storeWrites.Add(int64(objects))
	r.stats.storeTxns.Add(int64(txns))
}

// flushLeases writes the renewed leases in batches and keeps the uid the
// store stamped on new ones; on failure they are written again next time.
func (r *Registry) flushLeases(ctx context.Context) {
	r.mu.Lock()
	leases := make([]*coordinationv1.Lease, 0, len(r.dirtyLeas))
	for name := range r.dirtyLeas {
		leases = append(leases, r.entries[name].lease.DeepCopy())
	}
	clear(r.dirtyLeas)
	r.mu.Unlock()
	if len(leases) == 0 {
		return
	}
	_, err := r.leases.PutBatch(ctx, leases)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.logger.Error("store leases", "count", len(leases), "err", err)
		for _, l := range leases {
			r.dirtyLeas[l.Name] = true
		}
		return
	}
	r.countWrites(len(leases), txnCount(len(leases)))
	for _, l := range leases {
		if e, ok := r.entries[l.Name]; ok && e.lease.UID == "" {
			e.lease.UID, e.lease.CreationTimestamp = l.UID, l.CreationTimestamp
		}
	}
}

// writeCluster stores one cluster and records the new resourceVersion in
// memory. A conflict means the store holds a version memory has not seen:
// someone else wrote it, or an earlier write landed although its caller
// saw an error (a cancelled context). Memory wins: the write is retried at
// once on top of the stored version, and at the next flush if that fails.
func (r *Registry) writeCluster(ctx context.Context, c *v1alpha1.Cluster) {
	updated, err := r.clusters.Update(ctx, c)
	if apierrors.IsConflict(err) {
		if stored, getErr := r.clusters.Get(ctx, "", c.Name); getErr == nil {
			c.ResourceVersion = stored.ResourceVersion
			updated, err = r.clusters.Update(ctx, c)
			r.mu.Lock()
			r.entries[c.Name].obj.ResourceVersion = stored.ResourceVersion
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.logger.Error("store cluster", "cluster", c.Name, "err", err)
		r.dirty[c.Name] = true
		return
	}
	r.countWrites(1, 1)
	r.entries[c.Name].obj.ResourceVersion = updated.ResourceVersion
}

// apply runs a registration, an API update or other writer work.
func (r *Registry) apply(ctx context.Context, op updateOp) (*v1alpha1.Cluster, error) {
	switch {
	case op.register != nil:
		return r.register(ctx, op.register.ClusterName)
	case op.run != nil:
		op.run(ctx)
		return nil, nil
	}
	return r.update(ctx, op.update)
}

// Flush stores every change held in memory now, on the writer goroutine
// (flushes never overlap), and returns when done.
func (r *Registry) Flush(ctx context.Context) error {
	_, err := r.submit(ctx, updateOp{run: func(ctx context.Context) {
		r.flushLeases(ctx)
		r.flush(ctx)
	}})
	return err
}

// register creates the Cluster object of a cluster seen for the first time.
func (r *Registry) register(ctx context.Context, name string) (*v1alpha1.Cluster, error) {
	r.mu.Lock()
	e, known := r.entries[name]
	r.mu.Unlock()
	if known {
		r.mu.Lock()
		defer r.mu.Unlock()
		return e.obj.DeepCopy(), nil // registered by an earlier connection meanwhile
	}
	created, err := r.clusters.Create(ctx, &v1alpha1.Cluster{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindCluster), ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		created, err = r.clusters.Get(ctx, "", name)
	}
	if err != nil {
		return nil, err
	}
	r.countWrites(1, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	e = &entry{obj: created, obs: health.Observations{Registered: created.CreationTimestamp.Time}}
	r.entries[name] = e
	r.recordLocked(created, corev1.EventTypeNormal, "Registered", "cluster registered on its agent's first connection", now)
	// Arms the startup-grace deadline, in case the agent never renews.
	r.evaluateLocked(name, e, now)
	r.logger.Info("cluster registered", "cluster", name)
	return created.DeepCopy(), nil
}

// update applies an API update through the store, checking the version.
func (r *Registry) update(ctx context.Context, req *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	r.mu.Lock()
	e, ok := r.entries[req.Name]
	if !ok {
		r.mu.Unlock()
		return nil, apierrors.NewNotFound(ClusterKind.GroupResource(), req.Name)
	}
	if req.ResourceVersion != e.obj.ResourceVersion {
		r.mu.Unlock()
		return nil, apierrors.NewConflict(ClusterKind.GroupResource(), req.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	now := r.clock.Now()
	wasCordoned := e.obj.Spec.Unschedulable
	before, beforeObs, beforeState := e.obj, e.obs, e.state // restored if the store refuses
	next := e.obj.DeepCopy()
	next.Labels, next.Annotations = req.Labels, req.Annotations
	managed := managedTaints(e.obj.Spec.Taints)
	next.Spec = req.Spec
	next.Spec.Taints = append(operatorTaints(req.Spec.Taints, now), managed...)
	e.obj = next
	e.obs.Cordoned = next.Spec.Unschedulable
	if wasCordoned != next.Spec.Unschedulable {
		reason := map[bool]string{true: "Cordoned", false: "Uncordoned"}[next.Spec.Unschedulable]
		r.recordLocked(next, corev1.EventTypeNormal, reason, "cluster marked "+map[bool]string{true: "unschedulable", false: "schedulable"}[next.Spec.Unschedulable], now)
	}
	r.evaluateLocked(req.Name, e, now)
	toStore := e.obj.DeepCopy()
	delete(r.dirty, req.Name)
	r.mu.Unlock()

	updated, err := r.clusters.Update(ctx, toStore)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		// A refused update changes nothing. Health changes that happened
		// meanwhile are re-derived by evaluating again.
		e.obj, e.obs, e.state = before, beforeObs, beforeState
		r.evaluateLocked(req.Name, e, r.clock.Now())
		return nil, err
	}
	r.countWrites(1, 1)
	e.obj.ResourceVersion = updated.ResourceVersion
	return e.obj.DeepCopy(), nil
}

func managedTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if health.IsManaged(t.Key) {
			out = append(out, t)
		}
	}
	return out
}

// validateSpec rejects an update the hub cannot store, naming the field.
func validateSpec(c *v1alpha1.Cluster) error {
	var errs field.ErrorList
	taints := field.NewPath("spec", "taints")
	for i, t := range c.Spec.Taints {
		p := taints.Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupName, Kind: v1alpha1.KindCluster}, c.Name, errs)
	}
	return nil
}
