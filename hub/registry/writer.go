package registry

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/health"
)

// finalFlushTimeout bounds the flush on shutdown; storeOpTimeout bounds
// each write round, so a stalled API server fails requests instead of
// hanging them (what was not written is retried at the next flush).
//
// Changes other than health (status reports, lease renewals) get
// finalRestFlushTimeout of it: a fleet's worth of them would hold a stop
// up for the whole timeout (10 s at 10,000 agents), and they only refresh
// what the API shows (agents report again once reconnected; a restarted
// hub gives every cluster the restart grace; a replica taking over has the
// leader's gossiped table).
const (
	finalFlushTimeout     = 10 * time.Second
	finalRestFlushTimeout = 2 * time.Second
	storeOpTimeout        = 30 * time.Second
)

// apiWriters is how many writes a flush has in flight at once.
const apiWriters = 8

func withTimeout(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	f(ctx)
}

// runWriter is the only goroutine that writes clusters and leases: a flush
// every FlushInterval, and registrations and API updates in between.
//
// Leases have their own, longer interval: each is written at most once per
// LeaseFlushInterval however often its agent renews (and less often when
// LeaseWritesPerSecond is short for the fleet), so lease writes grow with
// the number of clusters, not with the heartbeat rate. Health is decided
// in memory; the stored renewTime only matters after a restart, which gets
// its own grace.
func (r *Registry) runWriter(ctx context.Context) {
	ticker := r.clock.NewTicker(r.cfg.FlushInterval)
	defer ticker.Stop()
	leaseTicker := r.clock.NewTicker(r.cfg.LeaseFlushInterval)
	defer leaseTicker.Stop()
	for {
		select {
		case <-ctx.Done():
			r.finalFlush(ctx)
			return
		case <-ticker.C():
			withTimeout(ctx, r.flushAll)
		case <-r.flushSoon:
			withTimeout(ctx, r.flushAll)
		case <-leaseTicker.C():
			withTimeout(ctx, func(ctx context.Context) { r.flushLeases(ctx, r.leaseBudget()) })
		case op := <-r.updates:
			withTimeout(ctx, func(ctx context.Context) { r.applyAll(ctx, r.drainUpdates(op)) })
		}
	}
}

// finalFlush stores what changed before the registry stops: health
// changes first (they must be stored), then the rest (status reports,
// lease renewals: an agent reports again once it has reconnected) for at
// most finalRestFlushTimeout, and logs what it stored and what it could
// not.
func (r *Registry) finalFlush(ctx context.Context) {
	started := r.clock.Now()
	writes := r.stats.storeWrites.Load()
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
	defer cancel()
	r.flush(final, true)
	rest, cancelRest := context.WithTimeout(final, finalRestFlushTimeout)
	r.flush(rest, false)
	r.flushLeases(rest, 0)
	cancelRest()
	r.mu.Lock()
	clustersLeft, leasesLeft := len(r.dirty), len(r.dirtyLeas)
	r.mu.Unlock()
	r.logger.Info("registry stopped: stored the last changes", "objects", r.stats.storeWrites.Load()-writes,
		"took", r.clock.Since(started).Round(time.Millisecond), "clustersUnstored", clustersLeft, "leasesUnstored", leasesLeft)
}

// leaseBudget is how many leases one flush may write (0: all): the
// LeaseWritesPerSecond of one LeaseFlushInterval, less the Cluster writes
// made since the last lease flush (those are never held back: health
// changes must be stored), so the registry's writes stay within the rate
// in a steady fleet. Leases keep a tenth of it whatever Clusters take.
func (r *Registry) leaseBudget() int {
	if r.cfg.LeaseWritesPerSecond <= 0 {
		return 0
	}
	total := max(1, int(r.cfg.LeaseWritesPerSecond*r.cfg.LeaseFlushInterval.Seconds()))
	others := int(r.clusterWrites.Swap(0))
	return max(1, total/10, total-others)
}

func (r *Registry) flushAll(ctx context.Context) { r.flush(ctx, false) }

// flush writes every changed cluster (with healthOnly, those whose health
// changed), and the leases of clusters whose Ready changed.
func (r *Registry) flush(ctx context.Context, healthOnly bool) {
	r.mu.Lock()
	leases := make([]*coordinationv1.Lease, 0, len(r.urgentLeases))
	for name := range r.urgentLeases {
		if e, ok := r.entries[name]; ok && e.lease != nil && !e.obs.Terminating {
			leases = append(leases, e.lease.DeepCopy())
			delete(r.dirtyLeas, name)
		}
	}
	clear(r.urgentLeases)
	if !healthOnly {
		r.promoteReportsLocked(r.clock.Now())
	}
	// Health changes go first: failover acts on the stored taints, and a
	// fleet's status reports can keep the writers busy for minutes.
	var sick, rest []*v1alpha1.Cluster
	health := map[string]bool{} // taken with a health change: kept so on failure
	for name := range r.dirty {
		if !r.healthDirty[name] {
			if !healthOnly {
				rest = append(rest, r.entries[name].obj.DeepCopy())
				delete(r.dirty, name)
			}
			continue
		}
		sick = append(sick, r.entries[name].obj.DeepCopy())
		delete(r.dirty, name)
		health[name] = true
		delete(r.healthDirty, name)
	}
	clusters := append(sick, rest...)
	r.writing, r.writingHealth = len(clusters), len(sick)
	r.mu.Unlock()

	r.writeLeases(ctx, leases)
	// Each cluster's writes stay in order (taints, then status); clusters
	// are independent.
	unstored := func(c *v1alpha1.Cluster) { r.markDirty(c.Name, health[c.Name]) }
	inParallel(ctx, clusters, func(c *v1alpha1.Cluster) {
		if !r.writeCluster(ctx, c) {
			unstored(c)
		}
	}, unstored)
	r.mu.Lock()
	r.writing, r.writingHealth = 0, 0
	r.mu.Unlock()
}

func (r *Registry) countWrites(objects int) { r.stats.storeWrites.Add(int64(objects)) }

// countClusterWrite counts a write of a Cluster (create, taints, status),
// which leaseBudget takes from the leases' share.
func (r *Registry) countClusterWrite() {
	r.countWrites(1)
	r.clusterWrites.Add(1)
}

// flushLeases writes renewed leases, at most budget of them (0: all),
// those written longest ago first; the rest stay dirty for the next flush.
func (r *Registry) flushLeases(ctx context.Context, budget int) {
	r.mu.Lock()
	names := make([]string, 0, len(r.dirtyLeas))
	for name := range r.dirtyLeas {
		names = append(names, name)
	}
	if budget > 0 && len(names) > budget {
		slices.SortFunc(names, func(a, b string) int { return r.leaseWritten[a].Compare(r.leaseWritten[b]) })
		names = names[:budget]
	}
	leases := make([]*coordinationv1.Lease, 0, len(names))
	for _, name := range names {
		delete(r.dirtyLeas, name)
		if e := r.entries[name]; !e.obs.Terminating {
			// The lease of a Cluster being deleted is the cleanup's to
			// delete: it is never written again.
			leases = append(leases, e.lease.DeepCopy())
		}
	}
	r.mu.Unlock()
	r.writeLeases(ctx, leases)
}

// writeLeases writes leases, apiWriters at a time.
func (r *Registry) writeLeases(ctx context.Context, leases []*coordinationv1.Lease) {
	inParallel(ctx, leases, func(l *coordinationv1.Lease) { r.writeLease(ctx, l) }, func(l *coordinationv1.Lease) { r.markLeaseDirty(l.Name) })
}

// markDirty and markLeaseDirty keep a write that was not attempted for the
// next flush.
func (r *Registry) markDirty(cluster string, health bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[cluster]; ok {
		r.dirty[cluster] = true
		if health {
			r.healthDirty[cluster] = true
		}
	}
}

func (r *Registry) markLeaseDirty(cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[cluster]; ok {
		r.dirtyLeas[cluster] = true
	}
}

// inParallel runs write on every item, apiWriters at a time: each write is
// an API request, mostly waiting for etcd. Once ctx ends no write starts:
// the items left go to skipped (a fleet's worth of writes behind a slow
// API would otherwise each fail on the spent deadline, and each be logged).
func inParallel[T any](ctx context.Context, items []T, write func(T), skipped func(T)) {
	if len(items) == 0 {
		return
	}
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(apiWriters, len(items)) {
		wg.Go(func() {
			for it := range work {
				write(it)
			}
		})
	}
	fed := 0
feed:
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		select {
		case work <- it:
			fed++
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	for _, rest := range items[fed:] {
		skipped(rest)
	}
	wg.Wait()
}

// writeLease creates or updates one lease and keeps the stored version in
// memory; on failure it is written again at the next flush.
func (r *Registry) writeLease(ctx context.Context, l *coordinationv1.Lease) {
	stored, err := r.putLease(ctx, l)
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[l.Name]
	if !ok {
		return // the cluster was deleted meanwhile
	}
	if err != nil {
		r.logger.Error("write lease", "cluster", l.Name, "err", err)
		r.dirtyLeas[l.Name] = true
		return
	}
	r.countWrites(1)
	r.leaseWritten[l.Name] = r.clock.Now()
	if e.lease != nil {
		e.lease.ResourceVersion, e.lease.UID, e.lease.CreationTimestamp = stored.ResourceVersion, stored.UID, stored.CreationTimestamp
	}
}

// putLease writes l over whatever is stored: memory holds the truth. An
// update drops the lease's managedFields (controller.ResetManagedFields): the
// hub is its only writer.
func (r *Registry) putLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if l.ResourceVersion == "" {
		created, err := r.leases.Create(ctx, l, metav1.CreateOptions{FieldManager: controller.FieldManager})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
	}
	l.ManagedFields = controller.ResetManagedFields()
	updated, err := r.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if !apierrors.IsConflict(err) && !(l.ResourceVersion == "" && apierrors.IsInvalid(err)) {
		return updated, err
	}
	r.stats.storeConflicts.Add(1)
	stored, err := r.leases.Get(ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	l.ResourceVersion, l.UID = stored.ResourceVersion, stored.UID
	return r.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: controller.FieldManager})
}

// writeCluster stores what the hub owns of one cluster: its health taints
// (a spec update on top of the stored spec, so operators' fields are never
// overwritten), then its status (the status subresource; memory wins over
// whatever is stored). Taints first: whoever sees a cluster Unknown sees
// its unreachable taint too. The new resourceVersion goes to memory. It
// reports false when the write failed and should be tried again.
func (r *Registry) writeCluster(ctx context.Context, c *v1alpha1.Cluster) bool {
	stored, err := r.clusters.Get(ctx, c.Name, metav1.GetOptions{})
	if err == nil {
		stored, err = r.writeSpec(ctx, stored, r.managedTaints(c))
	}
	if err == nil {
		c.ResourceVersion = stored.ResourceVersion
		stored, err = r.writeStatus(ctx, c)
	}
	if err != nil && !apierrors.IsNotFound(err) { // not found: deleted through the API; Forget drops it from memory
		r.logger.Error("write cluster", "cluster", c.Name, "err", err)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[c.Name]; ok && err == nil {
		e.obj.ResourceVersion = newerVersion(e.obj.ResourceVersion, stored.ResourceVersion)
	}
	return true
}

// newerVersion returns the later of two resourceVersions. They are etcd
// revisions; should one not be a number, b (the one just seen) wins.
func newerVersion(a, b string) string {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil && x > y {
		return a
	}
	return b
}

func (r *Registry) writeStatus(ctx context.Context, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	stored, err := r.clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsConflict(err) {
		r.stats.storeConflicts.Add(1)
		var latest *v1alpha1.Cluster
		if latest, err = r.clusters.Get(ctx, c.Name, metav1.GetOptions{}); err == nil {
			c.ResourceVersion = latest.ResourceVersion
			stored, err = r.clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		}
	}
	if err == nil {
		r.countClusterWrite()
	}
	return stored, err
}

// writeSpec makes the spec update a cluster's write needs, if any: its
// health taints when they changed, and the drop of its managedFields
// (controller.DropManagedFields) with them or on its own. A drop on its own
// that fails is logged and left for the cluster's next write: it must not
// hold the status back.
func (r *Registry) writeSpec(ctx context.Context, stored *v1alpha1.Cluster, managed []corev1.Taint) (*v1alpha1.Cluster, error) {
	retaint := !sameTaints(r.managedTaints(stored), managed)
	updated, err := r.writeHealthTaints(ctx, stored, managed, retaint)
	if err != nil && !retaint && !apierrors.IsNotFound(err) {
		r.logger.Warn("cannot drop the cluster's managedFields now; trying again at its next write", "cluster", stored.Name, "err", err)
		return stored, nil
	}
	return updated, err
}

// writeHealthTaints replaces the health taints of stored with managed if
// retaint, keeping every other taint, and drops its managedFields if no
// apply owns any; without retaint the spec is left as stored. A conflict
// re-reads and tries again.
func (r *Registry) writeHealthTaints(ctx context.Context, stored *v1alpha1.Cluster, managed []corev1.Taint, retaint bool) (*v1alpha1.Cluster, error) {
	const attempts = 3
	var err error
	for range attempts {
		if !retaint && !controller.WorthStripping(stored.ManagedFields) {
			return stored, nil // nothing to write: none to drop, or an apply owns some
		}
		next := stored.DeepCopy()
		if retaint {
			next.Spec.Taints = append(r.operatorTaints(stored), managed...)
		}
		controller.DropManagedFields(next)
		var updated *v1alpha1.Cluster
		updated, err = r.clusters.Update(ctx, next, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		if err == nil {
			r.countClusterWrite()
			return updated, nil
		}
		if !apierrors.IsConflict(err) {
			return nil, err
		}
		r.stats.storeConflicts.Add(1)
		if stored, err = r.clusters.Get(ctx, stored.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	return nil, err
}

// sameTaints compares taints as the API stores them: timeAdded to the
// second. Memory holds the hub's own stamps to the nanosecond; stored,
// they read back rounded down, and are the same taints.
func sameTaints(a, b []corev1.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Key != y.Key || x.Value != y.Value || x.Effect != y.Effect || !sameSecond(x.TimeAdded, y.TimeAdded) {
			return false
		}
	}
	return true
}

// sameSecond compares two times as stored: to the second, a zero time
// being none.
func sameSecond(a, b *metav1.Time) bool {
	if a == nil || a.IsZero() || b == nil || b.IsZero() {
		return (a == nil || a.IsZero()) == (b == nil || b.IsZero())
	}
	return a.Unix() == b.Unix()
}

// maxUpdateBatch bounds the updates the writer takes at once.
const maxUpdateBatch = 256

// drainUpdates is first and the updates already waiting behind it.
func (r *Registry) drainUpdates(first updateOp) []updateOp {
	ops := []updateOp{first}
	for len(ops) < maxUpdateBatch {
		select {
		case op := <-r.updates:
			ops = append(ops, op)
		default:
			return ops
		}
	}
	return ops
}

// applyAll runs ops: registrations apiWriters at a time (each is an API
// create; a fleet connecting at once would otherwise register one by
// one), then the rest in the order they came. Every caller waits for its
// own op, so no op depends on another in the same batch.
func (r *Registry) applyAll(ctx context.Context, ops []updateOp) {
	var registrations, others []updateOp
	for _, op := range ops {
		if op.register != nil {
			registrations = append(registrations, op)
		} else {
			others = append(others, op)
		}
	}
	run := func(op updateOp) {
		obj, err := r.apply(ctx, op)
		op.done <- updateOutcome{obj: obj, err: err}
	}
	inParallel(ctx, registrations, run, func(op updateOp) { op.done <- updateOutcome{err: ctx.Err()} })
	for _, op := range others {
		run(op)
	}
}

// apply runs a registration or other writer work.
func (r *Registry) apply(ctx context.Context, op updateOp) (*v1alpha1.Cluster, error) {
	if op.register != nil {
		return r.register(ctx, op.register.ClusterName)
	}
	op.run(ctx)
	return nil, nil
}

// Flush stores every change held in memory now, on the writer goroutine
// (flushes never overlap), and returns when done.
func (r *Registry) Flush(ctx context.Context) error {
	_, err := r.submit(ctx, updateOp{run: func(ctx context.Context) {
		r.flushLeases(ctx, 0)
		r.flush(ctx, false)
	}})
	return err
}

// register reads the Cluster of a cluster whose agent connects before the
// informer delivered it (its join or certs issue created it a moment ago).
// Sessions of clusters without a Cluster never get here: a join or certs
// issue registers a cluster, and deleting its Cluster revokes it.
func (r *Registry) register(ctx context.Context, name string) (*v1alpha1.Cluster, error) {
	r.mu.Lock()
	e, known := r.entries[name]
	r.mu.Unlock()
	if known {
		r.mu.Lock()
		defer r.mu.Unlock()
		return e.obj.DeepCopy(), nil // registered by an earlier connection meanwhile
	}
	created, err := r.clusters.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if e, known := r.entries[name]; known { // the informer delivered it meanwhile
		return e.obj.DeepCopy(), nil
	}
	// Registered by the hub's clock, like every time health is judged by.
	e = &entry{obj: created, obs: health.Observations{Registered: now, Cordoned: created.Spec.Unschedulable, Terminating: created.DeletionTimestamp != nil}}
	r.entries[name] = e
	// Arms the startup-grace deadline, in case the agent never renews.
	r.evaluateLocked(name, e, now)
	r.logger.Info("cluster registered", "cluster", name)
	return created.DeepCopy(), nil
}

// managedTaints returns the taints of c the hub manages.
func (r *Registry) managedTaints(c *v1alpha1.Cluster) []corev1.Taint {
	owners := c.TaintOwners()
	return slices.DeleteFunc(slices.Clone(c.Spec.Taints), func(t corev1.Taint) bool { return !r.cfg.Health.IsManaged(t, owners) })
}

// operatorTaints returns the taints of c the hub does not manage.
func (r *Registry) operatorTaints(c *v1alpha1.Cluster) []corev1.Taint {
	owners := c.TaintOwners()
	return slices.DeleteFunc(slices.Clone(c.Spec.Taints), func(t corev1.Taint) bool { return r.cfg.Health.IsManaged(t, owners) })
}

// ClusterResource names clusters in API errors.
var ClusterResource = schema.GroupResource{Group: v1alpha1.GroupName, Resource: "clusters"}
