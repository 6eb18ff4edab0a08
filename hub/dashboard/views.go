package dashboard

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// clusterView joins a cluster's object (from the informer) with its lease
// (from the registry's memory).
func clusterView(c *v1alpha1.Cluster, l Lease, haveLease bool) ClusterView {
	v := ClusterView{
		Name: c.Name, Zone: c.Spec.Zone, Region: c.Spec.Region, Provider: c.Spec.Provider,
		Cordoned: c.Spec.Unschedulable, Kubernetes: c.Status.KubernetesVersion,
		Registered: millis(c.CreationTimestamp.Time), Terminating: c.DeletionTimestamp != nil,
	}
	for _, cond := range c.Status.Conditions {
		v.Conditions = append(v.Conditions, Condition{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason,
			Message: cond.Message, Since: millis(cond.LastTransitionTime.Time)})
	}
	if ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionReady); ready != nil {
		v.Ready, v.ReadyReason, v.ReadyMessage = string(ready.Status), ready.Reason, ready.Message
		v.ReadySince = millis(ready.LastTransitionTime.Time)
	}
	owners := c.TaintOwners()
	for _, t := range c.Spec.Taints {
		tv := TaintView{Key: t.Key, Value: t.Value, Effect: string(t.Effect), Policy: owners[v1alpha1.TaintOwnerKey(t)]}
		if t.TimeAdded != nil {
			tv.Added = millis(t.TimeAdded.Time)
		}
		v.Taints = append(v.Taints, tv)
	}
	if a := c.Status.Agent; a != nil {
		v.Agent, v.ConnectedTo, v.Transport, v.ClockSkew = a.Version, a.ConnectedTo, a.Transport, a.ClockSkew
	}
	if n := c.Status.NodeSummary; n != nil {
		v.Nodes = fmt.Sprintf("%d/%d", n.ReadyNum, n.TotalNum)
	}
	if haveLease {
		v.LastRenewal, v.LeaseDuration = millis(l.LastRenewal), l.Duration.Milliseconds()
		v.LastStatus, v.Connected = millis(l.LastStatus), l.Connected
	}
	return v
}

// bindingView describes a binding; zoneOf names a cluster's zone, for
// evictions per zone; grace is the hub's default graceful eviction timeout.
func bindingView(b controller.Binding, zoneOf func(string) string, grace time.Duration, now time.Time) BindingView {
	obj, spec, status := b.Object(), b.Spec(), b.Status()
	v := BindingView{
		Key: controller.KeyOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Resource: spec.Resource.Kind + "/" + spec.Resource.Name, Kind: spec.Resource.Kind,
		APIVer: spec.Resource.APIVersion, ResName: spec.Resource.Name, Replicas: spec.Replicas,
	}
	if c := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionScheduled); c != nil {
		v.Scheduled = string(c.Status)
	}
	if c := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionFullyApplied); c != nil {
		v.Applied = string(c.Status)
	}
	items := map[string]v1alpha1.AggregatedStatusItem{}
	for _, it := range status.AggregatedStatus {
		if _, seen := items[it.ClusterName]; !seen {
			items[it.ClusterName] = it
		}
	}
	for _, tc := range spec.Clusters {
		it := items[tc.Name]
		pv := PlacementView{Cluster: tc.Name, Replicas: tc.Replicas, Applied: it.Applied, Health: it.Health}
		if !it.Applied {
			pv.Message = it.AppliedMessage
		}
		v.Placement = append(v.Placement, pv)
	}
	for i := range spec.GracefulEvictionTasks {
		task := &spec.GracefulEvictionTasks[i]
		tv := TaskView{FromCluster: task.FromCluster, Zone: zoneOf(task.FromCluster), Reason: task.Reason,
			Producer: task.Producer, PurgeMode: task.PurgeMode}
		if task.CreationTimestamp != nil {
			tv.Created = millis(task.CreationTimestamp.Time)
		}
		verdict := eviction.Assess(task, obj.GetGeneration(), spec, status, grace, now)
		tv.Waiting = verdict.Waiting
		if verdict.Done {
			tv.Waiting = "ending: " + verdict.Reason
		}
		v.Tasks = append(v.Tasks, tv)
	}
	return v
}
