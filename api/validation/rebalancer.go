package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
)

// IsRebalancerAPIVersion reports whether apiVersion names the group of
// WorkloadRebalancers: Flotilla's, or Karmada's as written.
func IsRebalancerAPIVersion(apiVersion string) bool {
	return apiVersion == appsv1alpha1.APIVersion || apiVersion == appsv1alpha1.KarmadaAPIVersion
}

// WorkloadRebalancer decodes and checks a WorkloadRebalancer; the
// apiVersion is set to Flotilla's. The status is the hub's: whatever the
// document says of it is dropped.
func WorkloadRebalancer(raw []byte) (*appsv1alpha1.WorkloadRebalancer, field.ErrorList) {
	r := &appsv1alpha1.WorkloadRebalancer{}
	if errs := DecodeStrict(raw, r); len(errs) > 0 {
		return nil, errs
	}
	r.TypeMeta = appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancer)
	r.Status = appsv1alpha1.WorkloadRebalancerStatus{}
	errs := objectMeta(&r.ObjectMeta, false)
	errs = append(errs, WorkloadRebalancerSpec(&r.Spec, field.NewPath("spec"))...)
	return r, errs
}

// WorkloadRebalancerSpec checks the workloads (at least one, each with
// apiVersion, kind and name, no two alike) and the TTL (not negative). An
// empty namespace names a cluster-scoped workload: whether a kind is
// namespaced is not known here.
func WorkloadRebalancerSpec(spec *appsv1alpha1.WorkloadRebalancerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	wp := path.Child("workloads")
	if len(spec.Workloads) == 0 {
		errs = append(errs, field.Required(wp, "at least one workload"))
	}
	seen := map[appsv1alpha1.ObjectReference]int{}
	for i, w := range spec.Workloads {
		errs = append(errs, workloadReference(w, wp.Index(i))...)
		if first, dup := seen[w]; dup {
			errs = append(errs, field.Duplicate(wp.Index(i), fmt.Sprintf("same workload as %s", wp.Index(first))))
			continue
		}
		seen[w] = i
	}
	if ttl := spec.TTLSecondsAfterFinished; ttl != nil && *ttl < 0 {
		errs = append(errs, field.Invalid(path.Child("ttlSecondsAfterFinished"), *ttl, "must not be negative"))
	}
	return errs
}

func workloadReference(w appsv1alpha1.ObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if w.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	} else if _, err := schema.ParseGroupVersion(w.APIVersion); err != nil {
		errs = append(errs, field.Invalid(path.Child("apiVersion"), w.APIVersion, err.Error()))
	}
	switch {
	case w.Kind == "":
		errs = append(errs, field.Required(path.Child("kind"), ""))
	case !kindPattern.MatchString(w.Kind):
		errs = append(errs, field.Invalid(path.Child("kind"), w.Kind, "must be letters and digits, starting with a letter"))
	}
	errs = append(errs, name(w.Name, path.Child("name"))...)
	if w.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(w.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), w.Namespace, msg))
		}
	}
	return errs
}
