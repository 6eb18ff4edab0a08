package templateclient

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWriterResolves(t *testing.T) {
	f := newFixture(t)
	w := NewWriter(f.clients)
	// The mapper has read discovery before the CRD exists: resolving its
	// kind must reset it.
	if _, _, err := w.Resolve(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); err != nil {
		t.Fatal(err)
	}
	crd := f.widgetCRD(t)
	f.createWidget(t, crd, f.env.Namespace(t), "w1") // served from here on

	tests := []struct {
		gvk        schema.GroupVersionKind
		resource   schema.GroupVersionResource
		namespaced bool
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
		{schema.GroupVersionKind{Group: crd.Spec.Group, Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: "widgets"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.gvk.Kind, func(t *testing.T) {
			gvr, namespaced, err := w.Resolve(tt.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if gvr != tt.resource || namespaced != tt.namespaced {
				t.Errorf("Resolve(%s) = %s, namespaced %t; want %s, %t", tt.gvk, gvr, namespaced, tt.resource, tt.namespaced)
			}
		})
	}
	_, _, err := w.Resolve(schema.GroupVersionKind{Group: "nowhere.example.com", Version: "v1", Kind: "Nothing"})
	if !meta.IsNoMatchError(err) {
		t.Errorf("Resolve of an unknown kind: err = %v, want a no-match error", err)
	}
}

func TestWriterUpdatesStatus(t *testing.T) {
	f := newFixture(t)
	ns := f.env.Namespace(t)
	w := NewWriter(f.clients)
	ctx := t.Context()
	if _, err := f.env.Kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := w.Get(ctx, deploymentKind, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "apps/v1" || u.GetName() != "web" {
		t.Fatalf("Get returned %s %s", u.GetAPIVersion(), u.GetName())
	}
	status := map[string]any{"replicas": int64(2), "readyReplicas": int64(1), "observedGeneration": u.GetGeneration()}
	u.Object["status"] = status
	u.Object["spec"].(map[string]any)["replicas"] = int64(7) // not written through /status
	out, err := w.UpdateStatus(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedMap(out.Object, "status")
	if diff := cmp.Diff(status, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	stored, err := f.env.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *stored.Spec.Replicas != 2 || stored.Status.ReadyReplicas != 1 {
		t.Errorf("stored replicas %d, readyReplicas %d; want 2, 1", *stored.Spec.Replicas, stored.Status.ReadyReplicas)
	}
	var managers []string
	for _, m := range stored.ManagedFields {
		if m.Subresource == "status" {
			managers = append(managers, m.Manager)
		}
	}
	if diff := cmp.Diff([]string{FieldManager}, managers); diff != "" {
		t.Errorf("status managers (-want +got):\n%s", diff)
	}

	// A stale resourceVersion conflicts.
	if _, err := w.UpdateStatus(ctx, u); !apierrors.IsConflict(err) {
		t.Errorf("UpdateStatus at a stale resourceVersion: err = %v, want Conflict", err)
	}
	_, err = w.Get(ctx, deploymentKind, ns, "absent")
	if !apierrors.IsNotFound(err) {
		t.Errorf("Get of an absent template: err = %v, want NotFound", err)
	}
}
