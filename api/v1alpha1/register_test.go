package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/internal/apitest"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestSchemeRoundTrip(t *testing.T) {
	apitest.SchemeRoundTrip(t, v1alpha1.SchemeGroupVersion, v1alpha1.AddToScheme)
}

func TestResourceAndKind(t *testing.T) {
	if diff := cmp.Diff(schema.GroupResource{Group: "flotilla.io", Resource: "works"}, v1alpha1.Resource("works")); diff != "" {
		t.Errorf("Resource (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(schema.GroupKind{Group: "flotilla.io", Kind: "Work"}, v1alpha1.Kind(v1alpha1.KindWork)); diff != "" {
		t.Errorf("Kind (-want +got):\n%s", diff)
	}
}
