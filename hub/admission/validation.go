package admission

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
)

// Validation is the FlotillaValidation plugin. On CREATE and UPDATE of a
// kind in checks it runs api/validation on the object and refuses it with
// apierrors.NewInvalid, naming every offending field, so nothing invalid is
// stored however it was sent. Subresources (status) are not validated: the
// checks are of what users write. An UPDATE that leaves every checked field
// as it was (spec, name, labels) is let through, so that finalizers and
// annotations can still be changed on objects stored before a check
// existed.
type Validation struct {
	*admission.Handler
}

var _ admission.ValidationInterface = (*Validation)(nil)

// NewValidation returns the FlotillaValidation plugin.
func NewValidation() *Validation {
	return &Validation{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

// Validate refuses an invalid object.
func (v *Validation) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" || a.GetObject() == nil {
		return nil
	}
	gk := a.GetKind().GroupKind()
	check, ok := checks[gk]
	if !ok {
		return nil
	}
	obj, err := contentOf(a.GetObject())
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("validate %s %q: %w", gk.Kind, a.GetName(), err))
	}
	if a.GetOperation() == admission.Update && a.GetOldObject() != nil {
		old, err := contentOf(a.GetOldObject())
		if err == nil && equality.Semantic.DeepEqual(checkedFields(old), checkedFields(obj)) {
			return nil
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("validate %s %q: %w", gk.Kind, a.GetName(), err))
	}
	if errs := check(raw); len(errs) > 0 {
		name := (&unstructured.Unstructured{Object: obj}).GetName()
		return apierrors.NewInvalid(gk, name, errs)
	}
	return nil
}

// contentOf is obj as JSON-like maps: custom resources are unstructured
// already; typed objects are converted.
func contentOf(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// checkedFields is the part of an object the checks read: everything but
// the status and the metadata other than name, namespace and labels.
func checkedFields(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		switch k {
		case "apiVersion", "kind", "status":
		case "metadata":
			m, _ := v.(map[string]any)
			out[k] = map[string]any{"name": m["name"], "namespace": m["namespace"], "labels": m["labels"]}
		default:
			out[k] = v
		}
	}
	return out
}
