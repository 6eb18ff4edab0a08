package main

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// bindingStrategy is ResourceBinding's typed strategy, what a compiled-in
// kind would have: status reset on create and on spec updates, generation
// bumped on spec changes. Validation is left out: the CRD's schema
// validation is what a compiled-in kind would replace with Go code, which
// costs microseconds.
type bindingStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func (bindingStrategy) NamespaceScoped() bool { return true }

func (bindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	b := obj.(*v1alpha1.ResourceBinding)
	b.Status = v1alpha1.ResourceBindingStatus{}
	b.Generation = 1
}

func (bindingStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	b, prev := obj.(*v1alpha1.ResourceBinding), old.(*v1alpha1.ResourceBinding)
	b.Status = prev.Status
	if !equality.Semantic.DeepEqual(b.Spec, prev.Spec) {
		b.Generation = prev.Generation + 1
	}
}

func (bindingStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }
func (bindingStrategy) WarningsOnCreate(context.Context, runtime.Object) []string {
	return nil
}
func (bindingStrategy) Canonicalize(runtime.Object)                   {}
func (bindingStrategy) AllowCreateOnUpdate(context.Context) bool      { return false }
func (bindingStrategy) AllowUnconditionalUpdate(context.Context) bool { return true }
func (bindingStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
func (bindingStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (bindingStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(v1alpha1.APIVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// bindingStatusStrategy updates only the status.
type bindingStatusStrategy struct{ bindingStrategy }

func (bindingStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	b, prev := obj.(*v1alpha1.ResourceBinding), old.(*v1alpha1.ResourceBinding)
	b.Spec = prev.Spec
	b.Labels, b.Annotations = prev.Labels, prev.Annotations
}

func (bindingStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(v1alpha1.APIVersion): fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata", "labels"), fieldpath.MakePathOrDie("metadata", "annotations")),
	}
}

// bindingStorage is the REST storage of resourcebindings and
// resourcebindings/status.
func bindingStorage(scheme *runtime.Scheme, opts generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	strategy := bindingStrategy{scheme, names.SimpleNameGenerator}
	resource := v1alpha1.Resource("resourcebindings")
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &v1alpha1.ResourceBinding{} },
		NewListFunc:               func() runtime.Object { return &v1alpha1.ResourceBindingList{} },
		DefaultQualifiedResource:  resource,
		SingularQualifiedResource: v1alpha1.Resource("resourcebinding"),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		ResetFieldsStrategy:       strategy,
		TableConvertor:            rest.NewDefaultTableConvertor(resource),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: opts}); err != nil {
		return nil, err
	}
	status := *store
	status.UpdateStrategy = bindingStatusStrategy{strategy}
	status.ResetFieldsStrategy = bindingStatusStrategy{strategy}
	return map[string]rest.Storage{
		"resourcebindings":        store,
		"resourcebindings/status": &statusREST{store: &status},
	}, nil
}

// statusREST serves the status subresource: get and update only.
type statusREST struct{ store *genericregistry.Store }

func (r *statusREST) New() runtime.Object { return &v1alpha1.ResourceBinding{} }
func (r *statusREST) Destroy()            {}

func (r *statusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

func (r *statusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *statusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}
