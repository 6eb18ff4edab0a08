package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// SchemeBuilder registers the group's kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the group's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies a resource name (such as "clusters") with the group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind qualifies a kind name (such as KindCluster) with the group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// addKnownTypes registers every kind and list kind of the group version,
// and the meta types (ListOptions, DeleteOptions...) the client needs.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Cluster{}, &ClusterList{},
		&PropagationPolicy{}, &PropagationPolicyList{},
		&ClusterPropagationPolicy{}, &ClusterPropagationPolicyList{},
		&ResourceBinding{}, &ResourceBindingList{},
		&ClusterResourceBinding{}, &ClusterResourceBindingList{},
		&Work{}, &WorkList{},
		&PurgeRequest{}, &PurgeRequestList{},
		&ClusterTaintPolicy{}, &ClusterTaintPolicyList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
