package validation

import (
	"math"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// IsHubGroup reports whether group is Flotilla's or Karmada's: the hub's
// own kinds, never templates.
func IsHubGroup(group string) bool {
	return group == v1alpha1.GroupName || strings.HasSuffix(group, ".flotilla.io") || strings.HasSuffix(group, ".karmada.io")
}

// Template checks a resource template. namespaced says whether its kind is
// namespaced (the caller knows from its table of cluster-scoped kinds).
func Template(u *unstructured.Unstructured, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
	switch {
	case u.GetAPIVersion() == "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), ""))
	case err != nil:
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), err.Error()))
	case IsHubGroup(gv.Group):
		errs = append(errs, field.Forbidden(field.NewPath("apiVersion"), "the hub's own kinds are not propagated as templates"))
	}
	kind := u.GetKind()
	switch {
	case kind == "":
		errs = append(errs, field.Required(field.NewPath("kind"), ""))
	case !kindPattern.MatchString(kind):
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be letters and digits, starting with a letter"))
	case strings.HasSuffix(kind, "List"):
		errs = append(errs, field.Forbidden(field.NewPath("kind"), "a list is not a template; apply its items"))
	}
	meta := field.NewPath("metadata")
	errs = append(errs, name(u.GetName(), meta.Child("name"))...)
	if namespaced {
		for _, msg := range validation.IsDNS1123Label(u.GetNamespace()) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), u.GetNamespace(), msg))
		}
	} else if u.GetNamespace() != "" {
		errs = append(errs, field.Forbidden(meta.Child("namespace"), kind+" is cluster-scoped"))
	}
	errs = append(errs, metav1validation.ValidateLabels(u.GetLabels(), meta.Child("labels"))...)
	for _, f := range []string{"replicas", "parallelism"} {
		if r, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", f); found {
			if n, ok := r.(int64); err != nil || !ok || n < 0 || n > math.MaxInt32 {
				errs = append(errs, field.Invalid(field.NewPath("spec", f), r, "must be an integer from 0 to 2147483647"))
			}
		}
	}
	return errs
}

// kindPattern is what a kind may look like; it ends up in names and labels.
var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,62}$`)
