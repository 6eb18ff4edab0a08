// Package v1alpha1 holds Flotilla's workload operations API (group
// apps.flotilla.io, version v1alpha1): the WorkloadRebalancer of Karmada's
// rebalancer proposal, which asks for a Fresh reschedule of a list of
// workloads. Field names are Karmada's, so an apps.karmada.io/v1alpha1
// document is accepted as written. Deep copies are generated (make
// generate).
//
// +kubebuilder:object:generate=true
// +groupName=apps.flotilla.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName and Version of the workload operations API.
const (
	GroupName = "apps.flotilla.io"
	Version   = "v1alpha1"
)

// APIVersion is the apiVersion field of the group's objects.
const APIVersion = GroupName + "/" + Version

// KarmadaAPIVersion is Karmada's group of the same objects; documents
// written for it are accepted and stored as Flotilla's.
const KarmadaAPIVersion = "apps.karmada.io/v1alpha1"

// SchemeGroupVersion is the group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Kinds of the group.
const (
	KindWorkloadRebalancer     = "WorkloadRebalancer"
	KindWorkloadRebalancerList = "WorkloadRebalancerList"
)

// TypeMeta returns the TypeMeta of a kind of the group.
func TypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind}
}
