package admission

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/validation"
)

// check validates the JSON of an object, returning every problem with the
// path of its field.
type check func(raw []byte) field.ErrorList

// checks are the kinds FlotillaValidation validates, by group and kind.
// Karmada's groups are listed too: should the hub ever serve them, their
// documents get the checks of Flotilla's kinds, as the CLI gives them.
var checks = map[schema.GroupKind]check{
	{Group: v1alpha1.GroupName, Kind: v1alpha1.KindPropagationPolicy}:          propagationPolicy,
	{Group: v1alpha1.GroupName, Kind: v1alpha1.KindClusterPropagationPolicy}:   clusterPropagationPolicy,
	{Group: appsv1alpha1.GroupName, Kind: appsv1alpha1.KindWorkloadRebalancer}: workloadRebalancer,
	{Group: v1alpha1.GroupName, Kind: v1alpha1.KindCluster}:                    cluster,
	{Group: karmadaPolicyGroup, Kind: v1alpha1.KindPropagationPolicy}:          propagationPolicy,
	{Group: karmadaPolicyGroup, Kind: v1alpha1.KindClusterPropagationPolicy}:   clusterPropagationPolicy,
	{Group: karmadaAppsGroup, Kind: appsv1alpha1.KindWorkloadRebalancer}:       workloadRebalancer,
	{Group: v1alpha1.GroupName, Kind: v1alpha1.KindClusterTaintPolicy}:         clusterTaintPolicy,
	{Group: karmadaPolicyGroup, Kind: v1alpha1.KindClusterTaintPolicy}:         clusterTaintPolicy,
}

// Karmada's groups of the same kinds.
var (
	karmadaPolicyGroup = groupOf(validation.KarmadaPolicyAPIVersion)
	karmadaAppsGroup   = groupOf(appsv1alpha1.KarmadaAPIVersion)
)

func groupOf(apiVersion string) string {
	return schema.FromAPIVersionAndKind(apiVersion, "").Group
}

func propagationPolicy(raw []byte) field.ErrorList {
	_, errs := validation.PropagationPolicy(raw)
	return errs
}

func clusterPropagationPolicy(raw []byte) field.ErrorList {
	_, errs := validation.ClusterPropagationPolicy(raw)
	return errs
}

func workloadRebalancer(raw []byte) field.ErrorList {
	_, errs := validation.WorkloadRebalancer(raw)
	return errs
}

func cluster(raw []byte) field.ErrorList {
	_, errs := validation.Cluster(raw)
	return errs
}

func clusterTaintPolicy(raw []byte) field.ErrorList {
	_, errs := validation.ClusterTaintPolicy(raw)
	return errs
}
