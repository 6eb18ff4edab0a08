package controller

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// FieldManager names the hub in the managed fields of what it writes.
const FieldManager = "flotilla-hub"

// Binding is a ResourceBinding or a ClusterResourceBinding, seen alike:
// exactly one of the two is set. A controller may change it only when it
// is its own copy (DeepCopy of the informer's).
type Binding struct {
	RB  *v1alpha1.ResourceBinding
	CRB *v1alpha1.ClusterResourceBinding
}

// Object is the binding's metadata.
func (b Binding) Object() metav1.Object {
	if b.RB != nil {
		return b.RB
	}
	return b.CRB
}

// Spec is the binding's spec, to read or change in place.
func (b Binding) Spec() *v1alpha1.ResourceBindingSpec {
	if b.RB != nil {
		return &b.RB.Spec
	}
	return &b.CRB.Spec
}

// Status is the binding's status, to read or change in place.
func (b Binding) Status() *v1alpha1.ResourceBindingStatus {
	if b.RB != nil {
		return &b.RB.Status
	}
	return &b.CRB.Status
}

// DeepCopy copies the binding.
func (b Binding) DeepCopy() Binding {
	if b.RB != nil {
		return Binding{RB: b.RB.DeepCopy()}
	}
	return Binding{CRB: b.CRB.DeepCopy()}
}

// BindingAPI writes bindings through the typed client: spec and metadata
// with Update, status with UpdateStatus, both with the resourceVersion
// read (optimistic concurrency).
type BindingAPI struct {
	Client flotillav1alpha1.FlotillaV1alpha1Interface
}

var updateOptions = metav1.UpdateOptions{FieldManager: FieldManager}

// Get reads a binding from the API server (not an informer), by key.
func (a BindingAPI) Get(ctx context.Context, key string) (Binding, error) {
	if namespace, name, ok := strings.Cut(key, "/"); ok {
		rb, err := a.Client.ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
		return Binding{RB: rb}, err
	}
	crb, err := a.Client.ClusterResourceBindings().Get(ctx, key, metav1.GetOptions{})
	return Binding{CRB: crb}, err
}

// Update writes the binding's spec and metadata, and drops its
// managedFields (DropManagedFields): its later writes, status included,
// then cost the API server no field tracking.
func (a BindingAPI) Update(ctx context.Context, b Binding) (Binding, error) {
	if b.RB != nil {
		DropManagedFields(b.RB)
		rb, err := a.Client.ResourceBindings(b.RB.Namespace).Update(ctx, b.RB, updateOptions)
		return Binding{RB: rb}, err
	}
	DropManagedFields(b.CRB)
	crb, err := a.Client.ClusterResourceBindings().Update(ctx, b.CRB, updateOptions)
	return Binding{CRB: crb}, err
}

// UpdateStatus writes the binding's status.
func (a BindingAPI) UpdateStatus(ctx context.Context, b Binding) (Binding, error) {
	if b.RB != nil {
		rb, err := a.Client.ResourceBindings(b.RB.Namespace).UpdateStatus(ctx, b.RB, updateOptions)
		return Binding{RB: rb}, err
	}
	crb, err := a.Client.ClusterResourceBindings().UpdateStatus(ctx, b.CRB, updateOptions)
	return Binding{CRB: crb}, err
}

// LookupBinding returns a copy of the binding with key ("namespace/name"
// for a ResourceBinding, "name" for a ClusterResourceBinding) from the
// informers, or false.
func LookupBinding(bindings Source[*v1alpha1.ResourceBinding], clusterBindings Source[*v1alpha1.ClusterResourceBinding], key string) (Binding, bool) {
	if strings.Contains(key, "/") {
		if rb := bindings.Get(key); rb != nil {
			return Binding{RB: rb.DeepCopy()}, true
		}
		return Binding{}, false
	}
	if crb := clusterBindings.Get(key); crb != nil {
		return Binding{CRB: crb.DeepCopy()}, true
	}
	return Binding{}, false
}

// KeyOf is an object's key.
func KeyOf(o metav1.Object) string { return Key(o.GetNamespace(), o.GetName()) }

// Placer returns the placement the scheduler would give the binding key
// with this spec and status, and false when it has none; generation is
// the one the binding has once written with that placement. The detector
// creates bindings with it and the failover controller writes evictions
// with it, so that a placement costs no write of its own.
type Placer func(key string, generation int64, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) ([]v1alpha1.TargetCluster, bool)
