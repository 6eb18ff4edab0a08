package registry

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Observe takes what operators own of a cluster as the API server holds it
// (labels, annotations, spec but the health taints) into memory; the
// cluster informer calls it for every add and update. The hub's own writes
// come back here unchanged and change nothing. A cluster created through
// the API before its agent ever connected is registered, with the startup
// grace. A deletionTimestamp adds the terminating taint.
func (r *Registry) Observe(c *v1alpha1.Cluster) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	e, ok := r.entries[c.Name]
	if !ok {
		e = restoreEntry(c.DeepCopy(), nil, r.cfg.Health)
		r.entries[c.Name] = e
		r.logger.Debug("cluster seen in the API", "cluster", c.Name)
		r.evaluateLocked(c.Name, e, now)
		return
	}
	e.obj.ResourceVersion = newerVersion(e.obj.ResourceVersion, c.ResourceVersion)
	if c.DeletionTimestamp != nil && !e.obs.Terminating {
		// Deleted: its finalizer holds it while the terminating taint
		// makes its workloads leave.
		e.obs.Terminating = true
		e.obj.DeletionTimestamp, e.obj.Finalizers = c.DeletionTimestamp, c.Finalizers
		r.logger.Info("cluster being deleted: its workloads leave", "cluster", c.Name)
		r.evaluateLocked(c.Name, e, now)
	}
	if !sameTaints(r.managedTaints(c), r.managedTaints(e.obj)) {
		r.dirty[c.Name] = true // someone edited the hub's taints: put them back
	}
	if r.operatorPartEqual(c, e.obj) {
		return
	}
	wasCordoned := e.obj.Spec.Unschedulable
	next := e.obj.DeepCopy()
	next.Labels, next.Annotations = maps.Clone(c.Labels), maps.Clone(c.Annotations)
	managed := r.managedTaints(e.obj)
	next.Spec = *c.Spec.DeepCopy()
	next.Spec.Taints = append(r.operatorTaints(c), managed...)
	e.obj = next
	e.obs.Cordoned = next.Spec.Unschedulable
	if wasCordoned != next.Spec.Unschedulable {
		reason, state := "Uncordoned", "schedulable"
		if next.Spec.Unschedulable {
			reason, state = "Cordoned", "unschedulable"
		}
		r.recordLocked(next, corev1.EventTypeNormal, reason, "cluster marked "+state, now)
	}
	r.logger.Info("cluster changed through the API", "cluster", c.Name)
	r.evaluateLocked(c.Name, e, now)
}

// Forget drops a cluster deleted through the API from memory. Its agent,
// if still connected, is told the cluster is unknown at its next renewal.
func (r *Registry) Forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[name]; !ok {
		return
	}
	delete(r.entries, name)
	delete(r.dirty, name)
	delete(r.reportDirty, name)
	delete(r.healthDirty, name)
	delete(r.dirtyLeas, name)
	delete(r.leaseWritten, name)
	r.deadlines.Remove(name)
	r.forgetEventsLocked(name)
	r.logger.Info("cluster deleted through the API", "cluster", name)
}

// operatorPartEqual says whether a and b agree on what operators own.
func (r *Registry) operatorPartEqual(a, b *v1alpha1.Cluster) bool {
	specA, specB := a.Spec.DeepCopy(), b.Spec.DeepCopy()
	specA.Taints, specB.Taints = r.operatorTaints(a), r.operatorTaints(b)
	return equality.Semantic.DeepEqual(*specA, *specB) &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels) &&
		equality.Semantic.DeepEqual(a.Annotations, b.Annotations)
}
