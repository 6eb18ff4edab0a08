package controller_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
)

// TestBindingUpdateDropsManagedFields: a binding the hub updates loses the
// managedFields its creation left, and a later status write adds none.
func TestBindingUpdateDropsManagedFields(t *testing.T) {
	f := controllertest.New(t)
	created := f.CreateDeploymentBinding("web", v1alpha1.ResourceBindingSpec{Replicas: 2})
	if len(created.ManagedFields) == 0 {
		t.Fatal("a created binding has no managedFields: nothing to test")
	}
	api := controller.BindingAPI{Client: f.Flotilla}
	b := controller.Binding{RB: created.DeepCopy()}
	b.RB.Spec.Replicas = 3
	updated, err := api.Update(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	if updated.RB.Spec.Replicas != 3 || len(updated.RB.ManagedFields) != 0 {
		t.Fatalf("after the update: replicas %d, managedFields %+v; want 3 and none", updated.RB.Spec.Replicas, updated.RB.ManagedFields)
	}
	updated.RB.Status.SchedulerObservedGeneration = updated.RB.Generation
	if _, err := api.UpdateStatus(t.Context(), updated); err != nil {
		t.Fatal(err)
	}
	stored, err := f.Flotilla.ResourceBindings(f.Namespace).Get(t.Context(), created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.ManagedFields) != 0 {
		t.Errorf("after a status write: managedFields %+v, want none", stored.ManagedFields)
	}
}
