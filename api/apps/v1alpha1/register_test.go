package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/internal/apitest"
)

func TestSchemeRoundTrip(t *testing.T) {
	apitest.SchemeRoundTrip(t, appsv1alpha1.SchemeGroupVersion, appsv1alpha1.AddToScheme)
}

func TestResourceAndKind(t *testing.T) {
	want := schema.GroupResource{Group: "apps.flotilla.io", Resource: "workloadrebalancers"}
	if diff := cmp.Diff(want, appsv1alpha1.Resource("workloadrebalancers")); diff != "" {
		t.Errorf("Resource (-want +got):\n%s", diff)
	}
	wantKind := schema.GroupKind{Group: "apps.flotilla.io", Kind: "WorkloadRebalancer"}
	if diff := cmp.Diff(wantKind, appsv1alpha1.Kind(appsv1alpha1.KindWorkloadRebalancer)); diff != "" {
		t.Errorf("Kind (-want +got):\n%s", diff)
	}
}
