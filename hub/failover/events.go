package failover

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// record logs and records events for what reconcile stored, on the
// binding and on its template.
func (c *Controller) record(obj metav1.Object, spec *v1alpha1.ResourceBindingSpec, evicted []eviction.Eviction, ended []endedTask, failedBack []string) {
	bindingRef := controller.BindingRef(obj)
	templateRef := controller.TemplateRef(spec.Resource)
	event := func(eventType, reason, message string) {
		c.recorder.Event(bindingRef, eventType, reason, message)
		c.recorder.Event(templateRef, eventType, reason, message)
	}
	key := controller.Key(obj.GetNamespace(), obj.GetName())
	for _, e := range evicted {
		c.evictions.Add(1)
		mode := v1alpha1.NormalPurgeMode(e.PurgeMode)
		c.logger.Info("evicted", "binding", key, "cluster", e.Cluster, "reason", e.Reason, "purgeMode", mode)
		event(corev1.EventTypeWarning, "Evicted", fmt.Sprintf("evicted from %s (%s, purge mode %s): %s", e.Cluster, e.Reason, mode, e.Message))
	}
	for _, t := range ended {
		c.tasksEnded.Add(1)
		c.logger.Info("eviction task ended", "binding", key, "cluster", t.task.FromCluster, "reason", t.reason)
		message := fmt.Sprintf("eviction from %s ended (%s); its copy there is removed", t.task.FromCluster, t.reason)
		switch {
		case t.cancelled && t.reason == reasonNoReplacement:
			message = fmt.Sprintf("eviction from %s called off: no other cluster can take the workload, which stays there", t.task.FromCluster)
		case t.cancelled:
			message = fmt.Sprintf("eviction from %s called off: the cluster recovered before any other cluster could take the workload, which stays there", t.task.FromCluster)
		case v1alpha1.NormalPurgeMode(t.task.PurgeMode) == v1alpha1.PurgeModeDirectly:
			message = fmt.Sprintf("eviction from %s ended (%s); its copy was removed when it was evicted", t.task.FromCluster, t.reason)
		}
		event(corev1.EventTypeNormal, "EvictionTaskEnded", message)
	}
	if len(failedBack) > 0 {
		c.logger.Info("failback", "binding", key, "clusters", failedBack)
		event(corev1.EventTypeNormal, "Failback", fmt.Sprintf("%s Ready again for the stabilization period: rescheduling afresh", strings.Join(failedBack, ", ")))
	}
}
