package apitest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Kind describes one of Flotilla's kinds as its CRD should serve it.
type Kind struct {
	GVK schema.GroupVersionKind
	// Resource is the plural resource name.
	Resource   string
	ShortNames []string
	Namespaced bool
	// HasStatus: the kind has a status, written through the status
	// subresource.
	HasStatus bool
	// Columns are the printer columns' names in order, WideColumns those
	// only -o wide shows (priority 1), after them.
	Columns, WideColumns []string
	// New returns an empty object of the kind, NewList an empty list.
	New, NewList func() runtime.Object
}

// CRDName is the name of the kind's CustomResourceDefinition.
func (k Kind) CRDName() string { return k.Resource + "." + k.GVK.Group }

// Kinds lists every kind of api/v1alpha1 and api/apps/v1alpha1.
func Kinds() []Kind {
	fl := func(kind string) schema.GroupVersionKind { return v1alpha1.SchemeGroupVersion.WithKind(kind) }
	bindingColumns, bindingWide := []string{"Scheduled", "FullyApplied", "Age"}, []string{"Kind", "Resource", "Replicas"}
	policyColumns := []string{"Priority", "Scheduling", "Age"}
	return []Kind{
		{GVK: fl(v1alpha1.KindCluster), Resource: "clusters", HasStatus: true,
			Columns: []string{"Ready", "Taints", "Version", "Age"}, WideColumns: []string{"Zone", "Region", "Provider"},
			New: func() runtime.Object { return &v1alpha1.Cluster{} }, NewList: func() runtime.Object { return &v1alpha1.ClusterList{} }},
		{GVK: fl(v1alpha1.KindPropagationPolicy), Resource: "propagationpolicies", ShortNames: []string{"pp"}, Namespaced: true,
			Columns: policyColumns,
			New:     func() runtime.Object { return &v1alpha1.PropagationPolicy{} }, NewList: func() runtime.Object { return &v1alpha1.PropagationPolicyList{} }},
		{GVK: fl(v1alpha1.KindClusterPropagationPolicy), Resource: "clusterpropagationpolicies", ShortNames: []string{"cpp"},
			Columns: policyColumns,
			New:     func() runtime.Object { return &v1alpha1.ClusterPropagationPolicy{} }, NewList: func() runtime.Object { return &v1alpha1.ClusterPropagationPolicyList{} }},
		{GVK: fl(v1alpha1.KindResourceBinding), Resource: "resourcebindings", ShortNames: []string{"rb"}, Namespaced: true, HasStatus: true,
			Columns: bindingColumns, WideColumns: bindingWide,
			New: func() runtime.Object { return &v1alpha1.ResourceBinding{} }, NewList: func() runtime.Object { return &v1alpha1.ResourceBindingList{} }},
		{GVK: fl(v1alpha1.KindClusterResourceBinding), Resource: "clusterresourcebindings", ShortNames: []string{"crb"}, HasStatus: true,
			Columns: bindingColumns, WideColumns: bindingWide,
			New: func() runtime.Object { return &v1alpha1.ClusterResourceBinding{} }, NewList: func() runtime.Object { return &v1alpha1.ClusterResourceBindingList{} }},
		{GVK: fl(v1alpha1.KindWork), Resource: "works", Namespaced: true, HasStatus: true,
			Columns: []string{"Applied", "Age"}, WideColumns: []string{"Generation", "Acked"},
			New: func() runtime.Object { return &v1alpha1.Work{} }, NewList: func() runtime.Object { return &v1alpha1.WorkList{} }},
		{GVK: fl(v1alpha1.KindPurgeRequest), Resource: "purgerequests", HasStatus: true,
			Columns: []string{"Binding", "Namespace", "Cluster", "Result", "Age"},
			New:     func() runtime.Object { return &v1alpha1.PurgeRequest{} }, NewList: func() runtime.Object { return &v1alpha1.PurgeRequestList{} }},
		{GVK: fl(v1alpha1.KindClusterTaintPolicy), Resource: "clustertaintpolicies", ShortNames: []string{"ctp"},
			Columns: []string{"Taints", "Effect", "Add-On", "Age"}, WideColumns: []string{"Remove-On", "Target-Clusters"},
			New: func() runtime.Object { return &v1alpha1.ClusterTaintPolicy{} }, NewList: func() runtime.Object { return &v1alpha1.ClusterTaintPolicyList{} }},
		{GVK: appsv1alpha1.SchemeGroupVersion.WithKind(appsv1alpha1.KindWorkloadRebalancer), Resource: "workloadrebalancers", HasStatus: true,
			Columns: []string{"Finished", "Age"},
			New:     func() runtime.Object { return &appsv1alpha1.WorkloadRebalancer{} }, NewList: func() runtime.Object { return &appsv1alpha1.WorkloadRebalancerList{} }},
	}
}

// Filled returns an object of the kind with every field set (Fill) and
// metadata as the API server would have it.
func (k Kind) Filled() runtime.Object {
	obj := k.New()
	Fill(obj)
	obj.GetObjectKind().SetGroupVersionKind(k.GVK)
	m := obj.(metav1.Object)
	m.SetName("filled-" + k.Resource)
	if k.Namespaced {
		m.SetNamespace("default")
	}
	m.SetLabels(map[string]string{"app": "web", "flotilla.io/test": "filled"})
	m.SetAnnotations(map[string]string{"flotilla.io/binding": "default/web-deployment"})
	m.SetGeneration(3)
	m.SetUID(types.UID("6f1c8b2e-0c1d-4c4e-9d55-0a8d1c3e7f10"))
	m.SetResourceVersion("42")
	m.SetCreationTimestamp(metav1.NewTime(Epoch))
	m.SetFinalizers([]string{"flotilla.io/cleanup"})
	return obj
}
