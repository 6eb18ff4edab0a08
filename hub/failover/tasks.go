package failover

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// endedTask is a task that is over, and why. A cancelled one gave its
// cluster back: it recovered before any replacement could be scheduled.
type endedTask struct {
	task      v1alpha1.GracefulEvictionTask
	reason    string
	cancelled bool
}

// reasonRecovered ends a task whose cluster recovered before the binding
// found a replacement: the workload stays where it runs.
const reasonRecovered = "ClusterRecovered"

// reasonNoReplacement ends an application-failure task for which the
// scheduler found no other cluster.
const reasonNoReplacement = "NoReplacement"

// endTasks removes the tasks that are over from j.spec and returns them.
// A task the scheduler found no replacement for is called off (its
// cluster given back, the workload staying where it runs) when the
// cluster recovered (taint manager, and Never tasks), or at once for an
// application failure: with nowhere else to go, an unhealthy copy beats
// none, and the unhealthy count starts again.
func (c *Controller) endTasks(j *judgement, tolerations []corev1.Toleration) []endedTask {
	key, generation, spec, status, now, wake := j.key, j.read.GetGeneration(), j.spec, j.status, j.now, j.wake
	var ended []endedTask
	kept := spec.GracefulEvictionTasks[:0:0]
	// Judged on the instants the stored times stand for (instants.go).
	judged := *status
	if lst := status.LastScheduledTime; lst != nil {
		judged.LastScheduledTime = &metav1.Time{Time: c.bindingTimes.at(key, lastScheduledOf, lst, now)}
	}
	for i := range spec.GracefulEvictionTasks {
		task := spec.GracefulEvictionTasks[i]
		precise := task
		if task.CreationTimestamp != nil {
			precise.CreationTimestamp = &metav1.Time{Time: c.bindingTimes.at(key, taskOf(task.FromCluster), task.CreationTimestamp, now)}
		}
		v := eviction.Assess(&precise, generation, spec, &judged, c.cfg.GracefulEvictionTimeout, now)
		switch {
		case v.Done && c.oldCopyLingers(j, task):
			// Its replacement waits for the old copy (or fencing): ending
			// the task would let the binding controller create it at once.
		case v.Done:
			ended = append(ended, endedTask{task: task, reason: v.Reason})
			continue
		case v.NoReplacement && task.Producer == eviction.ProducerApplicationFailover:
			ended = append(ended, endedTask{task: task, reason: reasonNoReplacement, cancelled: true})
			giveBack(spec, &task)
			c.restartUnhealthy(key, task.FromCluster, now)
			continue
		case v.NoReplacement && c.recovered(task.FromCluster, tolerations, now):
			ended = append(ended, endedTask{task: task, reason: reasonRecovered, cancelled: true})
			giveBack(spec, &task)
			continue
		}
		wake.at(v.Recheck)
		kept = append(kept, task)
	}
	if len(ended) > 0 {
		spec.GracefulEvictionTasks = kept
	}
	return ended
}

// oldCopyLingers reports whether a Directly task's old copy has not been
// confirmed gone: its Work is still there (a tombstone until the agent
// confirms), it is not placed there again, and its Cluster is not being
// deleted. Such a task does not
// end by its grace period: the binding controller creates the new copies
// only once the old one is gone (or fenced), and the task's end would
// tell it there is nothing left to wait for.
func (c *Controller) oldCopyLingers(j *judgement, task v1alpha1.GracefulEvictionTask) bool {
	if v1alpha1.NormalPurgeMode(task.PurgeMode) != v1alpha1.PurgeModeDirectly || !slices.Contains(eviction.DirectlyPurged(j.spec), task.FromCluster) ||
		j.workOf == nil || j.workOf(task.FromCluster) == nil {
		return false
	}
	cl := c.clusters.Get(task.FromCluster)
	return cl != nil && cl.DeletionTimestamp == nil
}

// recovered reports whether a cluster is Ready and its taints no longer
// call for an eviction.
func (c *Controller) recovered(cluster string, tolerations []corev1.Toleration, now time.Time) bool {
	cl := c.clusters.Get(cluster)
	if cl == nil || !ready(cl) {
		return false
	}
	c.mu.Lock()
	since := c.zones.GraceStart()
	c.mu.Unlock()
	return !eviction.Decide(c.preciseTaints(cl, now), tolerations, since, now).Evict
}

// giveBack puts the task's cluster back into spec.clusters with the
// replicas it had.
func giveBack(spec *v1alpha1.ResourceBindingSpec, task *v1alpha1.GracefulEvictionTask) {
	if slices.ContainsFunc(spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == task.FromCluster }) {
		return
	}
	replicas := spec.Replicas
	if task.Replicas != nil {
		replicas = *task.Replicas
	}
	spec.Clusters = append(slices.Clone(spec.Clusters), v1alpha1.TargetCluster{Name: task.FromCluster, Replicas: replicas})
	slices.SortFunc(spec.Clusters, func(a, b v1alpha1.TargetCluster) int { return strings.Compare(a.Name, b.Name) })
}
