package crds_test

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Objects shaped as the hub, the agent and users write them: zero values
// where the code leaves them zero (replicas 0, ordinal 0, the core group
// ""), nulls inside manifests, optional parts left out.

var now = metav1.NewTime(time.Date(2026, time.March, 2, 8, 30, 0, 0, time.UTC))

func condition(conditions *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, generation int64) {
	meta.SetStatusCondition(conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: now})
}

// clusterRegistered is a Cluster as the hub creates it when an agent
// first connects: a name and nothing else.
func clusterRegistered() *v1alpha1.Cluster {
	return &v1alpha1.Cluster{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindCluster), ObjectMeta: metav1.ObjectMeta{Name: "member-1"}}
}

// clusterReady is a Cluster with everything the hub and operators set.
func clusterReady() *v1alpha1.Cluster {
	c := clusterRegistered()
	c.Labels = map[string]string{"env": "prod"}
	c.Spec = v1alpha1.ClusterSpec{Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Unschedulable: true,
		Taints: []corev1.Taint{
			{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now},
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
		}}
	s := &c.Status
	condition(&s.Conditions, v1alpha1.ClusterConditionReady, metav1.ConditionTrue, v1alpha1.ReasonClusterReady,
		"cluster agent renews its lease and its API server is healthy", 0)
	condition(&s.Conditions, v1alpha1.ClusterConditionClockSynced, metav1.ConditionFalse, v1alpha1.ReasonClockSkewed, "", 0)
	s.KubernetesVersion = "v1.37.2"
	s.NodeSummary = &v1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 0}
	s.ResourceSummary = &v1alpha1.ResourceSummary{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("48Gi"), corev1.ResourcePods: resource.MustParse("330")},
		Allocated:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2500m")},
	}
	s.Agent = &v1alpha1.AgentStatus{Version: "v0.9.0", ConnectedTo: "hub-0", ConnectedAt: &now, ClockSkew: "-1.2s"}
	s.APIEnablements = []v1alpha1.APIEnablement{
		{GroupVersion: "apps/v1", Resources: []v1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}, {Name: "statefulsets", Kind: "StatefulSet"}}},
		{GroupVersion: "v1", Resources: []v1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}},
		{GroupVersion: "example.io/v1"},
	}
	return c
}

// propagationSpec uses every part of a policy, some of them with zero
// values the validation allows.
func propagationSpec() v1alpha1.PropagationSpec {
	return v1alpha1.PropagationSpec{
		ResourceSelectors: []v1alpha1.ResourceSelector{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"},
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", LabelSelector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "web"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"front"}}},
			}},
		},
		Priority: ptr.To[int32](0),
		Placement: v1alpha1.Placement{
			ClusterAffinities: []v1alpha1.ClusterAffinityTerm{
				{AffinityName: "primary", ClusterAffinity: v1alpha1.ClusterAffinity{
					FieldSelector: &v1alpha1.FieldSelector{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: v1alpha1.FieldRegion, Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1"}}}},
					Exclude: []string{"member-3"},
				}},
				{AffinityName: "backup", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"member-3"}}},
			},
			ClusterTolerations: []corev1.Toleration{
				{Key: "cluster.karmada.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
			},
			SpreadConstraints: []v1alpha1.SpreadConstraint{{SpreadByField: v1alpha1.SpreadByFieldZone, MinGroups: 0, MaxGroups: 2}},
			ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference: &v1alpha1.ClusterPreferences{StaticWeightList: []v1alpha1.StaticClusterWeight{
					{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{"member-1"}}, Weight: 0},
					{TargetCluster: v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}, Weight: 2},
				}},
			},
		},
		Failover: &v1alpha1.FailoverBehavior{
			Application: &v1alpha1.ApplicationFailoverBehavior{
				DecisionConditions: v1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](30)},
				PurgeMode:          v1alpha1.PurgeModeGraciously, GracePeriodSeconds: ptr.To[int32](600),
				StatePreservation: &v1alpha1.StatePreservation{Rules: []v1alpha1.StatePreservationRule{{AliasLabelName: "ready", JSONPath: "{ .readyReplicas }"}}},
			},
			Cluster: &v1alpha1.ClusterFailoverBehavior{
				PurgeMode: v1alpha1.PurgeModeDirectly,
				Fencing:   &v1alpha1.Fencing{StopAfterSeconds: 30},
				Failback:  &v1alpha1.Failback{StabilizationSeconds: 0},
			},
		},
		PropagateDeps: true, SchedulerName: "default-scheduler", Preemption: "Never", ConflictResolution: "Abort",
		ActivationPreference: "Lazy", PreserveResourcesOnDeletion: ptr.To(false),
		DependentOverrides: []string{"override-1"}, Suspension: &v1alpha1.Suspension{Dispatching: ptr.To(true)},
	}
}

func propagationPolicy() *v1alpha1.PropagationPolicy {
	return &v1alpha1.PropagationPolicy{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindPropagationPolicy),
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-propagation", Namespace: "default"}, Spec: propagationSpec()}
}

// minimalPolicy has only what the validation requires.
func minimalPolicy() *v1alpha1.ClusterPropagationPolicy {
	return &v1alpha1.ClusterPropagationPolicy{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindClusterPropagationPolicy),
		ObjectMeta: metav1.ObjectMeta{Name: "everything"},
		Spec:       v1alpha1.PropagationSpec{ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace"}}}}
}

func clusterPropagationPolicy() *v1alpha1.ClusterPropagationPolicy {
	return &v1alpha1.ClusterPropagationPolicy{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindClusterPropagationPolicy),
		ObjectMeta: metav1.ObjectMeta{Name: "roles"}, Spec: propagationSpec()}
}

// bindingDetected is a binding as the detector creates it: no result yet.
func bindingDetected() *v1alpha1.ResourceBinding {
	spec := propagationSpec()
	return &v1alpha1.ResourceBinding{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindResourceBinding),
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default"},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx",
				UID: "0b8f7a52-53f4-4b5c-a0c2-07a0b4d8e0c1", ResourceVersion: "1234"},
			ReplicaRequirements: &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			Replicas:            3, Placement: &spec.Placement, Failover: spec.Failover,
		}}
}

// bindingSpec is a scheduled binding's spec, leaving a cluster.
func bindingSpec() v1alpha1.ResourceBindingSpec {
	spec := bindingDetected().Spec
	spec.Clusters = []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 2}, {Name: "member-2", Replicas: 1}, {Name: "member-4"}}
	spec.GracefulEvictionTasks = []v1alpha1.GracefulEvictionTask{
		{FromCluster: "member-3", PurgeMode: v1alpha1.PurgeModeGracefully, Replicas: ptr.To[int32](0), Reason: "TaintUntolerated",
			Message: "cluster member-3 is not ready", Producer: "TaintManager", GracePeriodSeconds: ptr.To[int32](600), CreationTimestamp: &now},
		{FromCluster: "member-5", PurgeMode: v1alpha1.PurgeModeNever, Reason: "ApplicationFailure", Producer: "ApplicationFailover",
			SuppressDeletion: ptr.To(true), CreationTimestamp: &now},
	}
	spec.RescheduleTriggeredAt = &now
	spec.ConflictResolution, spec.SchedulerName = "Overwrite", "default-scheduler"
	return spec
}

// bindingStatus is what the scheduler and the status controller write.
func bindingStatus() v1alpha1.ResourceBindingStatus {
	s := v1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 2, SchedulerObservedAffinityName: "primary", LastScheduledTime: &now,
		AggregatedStatus: []v1alpha1.AggregatedStatusItem{
			{ClusterName: "member-1", Applied: true, Health: v1alpha1.HealthHealthy,
				Status: &runtime.RawExtension{Raw: []byte(`{"availableReplicas":2,"readyReplicas":2,"replicas":2,"updatedReplicas":2}`)}},
			{ClusterName: "member-2", AppliedMessage: "waiting for the agent", Health: v1alpha1.HealthUnknown},
			{ClusterName: "member-4", AppliedMessage: "no Work yet"},
		},
		FailbackClusters: []v1alpha1.FailbackCluster{{Name: "member-3", EvictedAt: now}},
	}
	condition(&s.Conditions, v1alpha1.BindingConditionScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "placed on member-1:2,member-2:1", 2)
	condition(&s.Conditions, v1alpha1.BindingConditionFullyApplied, metav1.ConditionFalse, v1alpha1.ReasonFullyAppliedProgress, "waiting for [member-2]", 2)
	return s
}

func bindingScheduled() *v1alpha1.ResourceBinding {
	b := bindingDetected()
	b.Generation = 2
	b.Spec, b.Status = bindingSpec(), bindingStatus()
	return b
}

// bindingUnschedulable failed to schedule: a False condition with the
// scheduler's reason.
func bindingUnschedulable() *v1alpha1.ResourceBinding {
	b := bindingDetected()
	condition(&b.Status.Conditions, v1alpha1.BindingConditionScheduled, metav1.ConditionFalse, v1alpha1.ReasonNoClusterFit,
		"0/3 clusters are available: 3 cluster(s) had untolerated taint {cluster.flotilla.io/not-ready: }", 1)
	return b
}

func clusterResourceBinding() *v1alpha1.ClusterResourceBinding {
	spec := bindingSpec()
	spec.Resource = v1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"}
	spec.Replicas, spec.ReplicaRequirements = 0, nil
	return &v1alpha1.ClusterResourceBinding{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindClusterResourceBinding),
		ObjectMeta: metav1.ObjectMeta{Name: "reader-clusterrole", Generation: 2}, Spec: spec, Status: bindingStatus()}
}

// deploymentManifest is a rendered Deployment: kubectl leaves
// creationTimestamp null in the pod template, and resources may be empty.
const deploymentManifest = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"team":"web"},"labels":{"app":"nginx"},` +
	`"name":"nginx","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"nginx"}},"strategy":{},` +
	`"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"nginx"}},"spec":{"containers":[{"image":"nginx:1.27",` +
	`"name":"nginx","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"requests":{"cpu":"100m"}}}],"x-unknown":[1,2.5,null]}}}}`

// workCreated is a Work as the binding controller creates it.
func workCreated() *v1alpha1.Work {
	return &v1alpha1.Work{TypeMeta: v1alpha1.TypeMeta(v1alpha1.KindWork),
		ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment-1a2b3c4d", Namespace: v1alpha1.ExecutionNamespace("member-1"), Generation: 1,
			Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: "default/nginx-deployment", v1alpha1.AnnotationWorkReplicas: "2"}},
		Spec: v1alpha1.WorkSpec{
			Workload: v1alpha1.WorkloadTemplate{Manifests: []v1alpha1.Manifest{
				{RawExtension: runtime.RawExtension{Raw: []byte(deploymentManifest)}},
				{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"},"data":{"a":""},"binaryData":null}`)}},
			}},
			Fencing: &v1alpha1.WorkFencing{StopAfterSeconds: 30},
		}}
}

// workApplied is a Work the agent applied and reported on.
func workApplied() *v1alpha1.Work {
	w := workCreated()
	w.Status.ObservedGeneration = 1
	condition(&w.Status.Conditions, v1alpha1.WorkConditionApplied, metav1.ConditionTrue, v1alpha1.ReasonAppliedSuccessful, "applied by the agent", 1)
	condition(&w.Status.Conditions, v1alpha1.WorkConditionFenced, metav1.ConditionFalse, v1alpha1.ReasonFencedRestored,
		"the agent applied the Work again after it reconnected: its workloads run as the Work says", 1)
	w.Status.ManifestStatuses = []v1alpha1.ManifestStatus{
		{Identifier: v1alpha1.ResourceIdentifier{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "default", Name: "nginx"},
			Status: &runtime.RawExtension{Raw: []byte(`{"availableReplicas":2,"readyReplicas":2,"replicas":2,"updatedReplicas":2}`)}, Health: v1alpha1.HealthHealthy},
		{Identifier: v1alpha1.ResourceIdentifier{Ordinal: 1, Group: "", Version: "v1", Kind: "ConfigMap", Namespace: "default", Name: "web"},
			Health: v1alpha1.HealthUnknown, Message: "no health rule for ConfigMap"},
	}
	return w
}

// workTombstone is a deleted Work waiting for its agent.
func workTombstone() *v1alpha1.Work {
	w := workApplied()
	w.DeletionTimestamp, w.Finalizers = &now, []string{"flotilla.io/agent-cleanup"}
	condition(&w.Status.Conditions, v1alpha1.WorkConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonAppliedFailed,
		"apply Deployment default/nginx: admission webhook \"validate.example.io\" denied the request", 1)
	return w
}

func rebalancerNew() *appsv1alpha1.WorkloadRebalancer {
	return &appsv1alpha1.WorkloadRebalancer{TypeMeta: appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancer),
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{
			Workloads: []appsv1alpha1.ObjectReference{
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"},
				{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"},
			},
			TTLSecondsAfterFinished: ptr.To[int32](0),
		}}
}

func rebalancerFinished() *appsv1alpha1.WorkloadRebalancer {
	r := rebalancerNew()
	r.Generation = 1
	r.Status = appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: 1, FinishTime: &now,
		ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
			{Workload: r.Spec.Workloads[1], Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
			{Workload: r.Spec.Workloads[0], Result: appsv1alpha1.RebalanceSuccessful},
		}}
	return r
}

// rebalancerRetrying has a workload without a result yet.
func rebalancerRetrying() *appsv1alpha1.WorkloadRebalancer {
	r := rebalancerFinished()
	r.Status.FinishTime = nil
	r.Status.ObservedWorkloads[1].Result = ""
	return r
}
