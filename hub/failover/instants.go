package failover

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// Never early. The API stores times to the second, rounded down: a taint
// added at 10.7 s reads back as 10 s, and a 3 s toleration counted from
// there ends at 13 s, 2.3 s after the taint came. Nothing may be evicted,
// nor a task ended, nor a failback made, before its toleration, grace or
// stabilization has run, so failover never takes a stored time for the
// instant it stands for. A time stored as T was stamped in [T, T+1s), and
// no later than when this hub first saw it: failover takes
// min(T+1s, first seen), but never before T, which is the earliest the
// stamp can have been and the latest it may be taken to be.
//
// A stamp made while the hub watches (a taint added by the registry or
// through the API, a task this controller created, a schedule) is first
// seen when its write comes back through the informer: the instant is
// late by that round trip, milliseconds. A stamp made before the hub
// started (first seen at its start) counts as T+1s: rounded up, up to a
// second late, never early. A time that does not exist yet (a taint
// without timeAdded) counts from when the hub first saw its owner carry
// it.

// instants remembers when this hub first saw each stored time of its
// owners (clusters, or bindings), so that the times that decide are known
// to within the informer's delivery rather than to the second. It is safe
// for concurrent use: informer handlers record, reconciles read.
type instants struct {
	mu      sync.Mutex
	byOwner map[string]map[stamp]time.Time
}

// stamp is one stored time of an owner: what it is of (e.g. "taint
// unreachable:NoExecute") and the stored value (Unix seconds; set false
// for a time not stored at all).
type stamp struct {
	of      string
	seconds int64
	set     bool
}

func newInstants() *instants { return &instants{byOwner: map[string]map[stamp]time.Time{}} }

func stampOf(of string, t *metav1.Time) stamp {
	if t == nil || t.IsZero() {
		return stamp{of: of}
	}
	return stamp{of: of, seconds: t.Unix(), set: true}
}

// instant is the earliest instant a stamp stored at s can stand for,
// given that the hub first saw it at seen.
func (s stamp) instant(seen time.Time) time.Time {
	if !s.set {
		return seen
	}
	stored := time.Unix(s.seconds, 0)
	switch latest := stored.Add(time.Second); {
	case seen.Before(stored):
		return stored // stamped ahead of this hub's clock: never before what it says
	case seen.After(latest):
		return latest
	}
	return seen
}

// observe sets the stamps an owner carries now, as an informer handler
// sees it (versions come in order): stamps seen before keep their instant,
// new ones get now's, and those the owner no longer carries are
// forgotten. No stamps forgets the owner.
func (in *instants) observe(owner string, stamps []stamp, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(stamps) == 0 {
		delete(in.byOwner, owner)
		return
	}
	old := in.byOwner[owner]
	next := make(map[stamp]time.Time, len(stamps))
	for _, s := range stamps {
		at, ok := old[s]
		if !ok {
			at = s.instant(now)
		}
		next[s] = at
	}
	in.byOwner[owner] = next
}

// at is the instant a stored time t of an owner stands for (see the top of
// this file), first seen now if the handler has not seen it yet (a
// reconcile can read a version the handler has still to hear of). Times
// with a fraction of a second were not read from the API and are taken as
// they are.
func (in *instants) at(owner, of string, t *metav1.Time, now time.Time) time.Time {
	if t != nil && t.Nanosecond() != 0 {
		return t.Time
	}
	s := stampOf(of, t)
	in.mu.Lock()
	defer in.mu.Unlock()
	seen, ok := in.byOwner[owner][s]
	if !ok {
		seen = s.instant(now)
		if in.byOwner[owner] == nil {
			in.byOwner[owner] = map[stamp]time.Time{}
		}
		in.byOwner[owner][s] = seen
	}
	return seen
}

// The stored times of clusters and bindings that decide.
const (
	readyOf         = "ready"         // a cluster's Ready condition's lastTransitionTime (failback)
	lastScheduledOf = "lastScheduled" // a binding's status.lastScheduledTime (task grace)
)

func taintOf(t *corev1.Taint) string { return "taint " + t.Key + ":" + string(t.Effect) }
func taskOf(cluster string) string   { return "task " + cluster }
func clusterStamps(cl *v1alpha1.Cluster) []stamp {
	var out []stamp
	for i := range cl.Spec.Taints {
		if t := &cl.Spec.Taints[i]; t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, stampOf(taintOf(t), t.TimeAdded))
		}
	}
	if cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady); cond != nil {
		out = append(out, stampOf(readyOf, &cond.LastTransitionTime))
	}
	return out
}

func bindingStamps(spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) []stamp {
	var out []stamp
	for i := range spec.GracefulEvictionTasks {
		task := &spec.GracefulEvictionTasks[i]
		out = append(out, stampOf(taskOf(task.FromCluster), task.CreationTimestamp))
	}
	if status.LastScheduledTime != nil {
		out = append(out, stampOf(lastScheduledOf, status.LastScheduledTime))
	}
	return out
}

// preciseTaints returns a copy of a cluster's taints whose NoExecute ones
// carry the instants their timeAdded stands for.
func (c *Controller) preciseTaints(cl *v1alpha1.Cluster, now time.Time) []corev1.Taint {
	out := make([]corev1.Taint, len(cl.Spec.Taints))
	for i, t := range cl.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			t.TimeAdded = &metav1.Time{Time: c.clusterTimes.at(cl.Name, taintOf(&t), t.TimeAdded, now)}
		}
		out[i] = t
	}
	return out
}

// clusterSeen records the times a cluster carries, as its informer handler
// sees it (cur nil: deleted).
func (c *Controller) clusterSeen(old, cur *v1alpha1.Cluster) {
	var stamps []stamp
	if cur != nil {
		stamps = clusterStamps(cur)
	}
	c.clusterTimes.observe(controller.Subject(old, cur).Name, stamps, c.clock.Now())
}

// bindingSeen records the times a binding carries, as its informer handler
// sees it (spec nil: deleted).
func (c *Controller) bindingSeen(key string, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) {
	var stamps []stamp
	if spec != nil {
		stamps = bindingStamps(spec, status)
	}
	c.bindingTimes.observe(key, stamps, c.clock.Now())
}

// stampTasks gives the tasks without a creation time one: now, as Karmada
// does. Such a task (written by hand or by another tool) has not started
// its grace period; counting it as expired would end it at once. It
// reports whether any was stamped (the spec must be stored).
func (c *Controller) stampTasks(key string, spec *v1alpha1.ResourceBindingSpec, now time.Time) bool {
	var tasks []v1alpha1.GracefulEvictionTask
	for i := range spec.GracefulEvictionTasks {
		if spec.GracefulEvictionTasks[i].CreationTimestamp != nil {
			continue
		}
		if tasks == nil {
			// A copy: the old array may be shared with the informer's.
			tasks = slices.Clone(spec.GracefulEvictionTasks)
		}
		tasks[i].CreationTimestamp = &metav1.Time{Time: now}
		c.logger.Info("eviction task without a creation time: its grace period starts now", "binding", key, "cluster", tasks[i].FromCluster)
	}
	if tasks == nil {
		return false
	}
	spec.GracefulEvictionTasks = tasks
	return true
}
