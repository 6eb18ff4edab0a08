package work

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeManifests(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		wantErr        string // "" means it decodes
	}{
		{"object", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, ""},
		{"not an object", `[1]`, "manifest 0: not a JSON object"},
		{"no kind", `{"apiVersion":"v1","metadata":{"name":"c"}}`, "manifest 0: v1  c: apiVersion and kind are required"},
		{"bad apiVersion", `{"apiVersion":"a/b/c","kind":"X","metadata":{"name":"c"}}`, "manifest 0: a/b/c X c: unexpected GroupVersion"},
		{"no name", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"c-"}}`, "manifest 0: v1 ConfigMap : metadata.name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decodeManifests([]json.RawMessage{json.RawMessage(tc.manifest)})[0]
			switch {
			case tc.wantErr == "" && m.err != nil:
				t.Fatalf("error %v, want none", m.err)
			case tc.wantErr == "" && m.obj.GetName() != "c":
				t.Fatalf("decoded %v", m.obj)
			case tc.wantErr != "" && (m.err == nil || !strings.Contains(m.err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", m.err, tc.wantErr)
			}
		})
	}
}

func TestPhases(t *testing.T) {
	const (
		deploy = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`
		ns     = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}`
		crd    = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"ws.example.com"}}`
		cr     = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`
		broken = `{"metadata":{}}`
	)
	for _, tc := range []struct {
		name      string
		manifests []string
		early     []int
		late      []int
	}{
		{"none", nil, nil, nil},
		{"manifest order without namespaces or CRDs", []string{deploy, cr, deploy}, nil, []int{0, 1, 2}},
		{"namespaces, then CRDs, then the rest", []string{cr, crd, deploy, ns, crd, ns}, []int{3, 5, 1, 4}, []int{0, 2}},
		{"undecodable manifests stay in place", []string{broken, ns, deploy}, []int{1}, []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raws := make([]json.RawMessage, len(tc.manifests))
			for i, m := range tc.manifests {
				raws[i] = json.RawMessage(m)
			}
			early, late := phases(decodeManifests(raws))
			if diff := cmp.Diff(tc.early, early); diff != "" {
				t.Errorf("early (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.late, late); diff != "" {
				t.Errorf("late (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	in := object(t, `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"web","namespace":"other","labels":{"app":"web","flotilla.io/work":"forged"},
			"annotations":{"note":"kept"},"resourceVersion":"7","uid":"u-1","generation":3,
			"creationTimestamp":"2030-01-01T00:00:00Z","managedFields":[{"manager":"kubectl"}]},
		"spec":{"replicas":2},"status":{"readyReplicas":2}}`)
	before := in.DeepCopy()
	got := prepare(in, "demo", "work-1", "default/web")
	want := object(t, `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"web","namespace":"demo",
			"labels":{"app":"web","flotilla.io/work":"work-1","flotilla.io/managed-by":"flotilla-agent"},
			"annotations":{"note":"kept","flotilla.io/binding":"default/web"}},
		"spec":{"replicas":2}}`)
	if diff := cmp.Diff(want.Object, got.Object); diff != "" {
		t.Errorf("prepared object (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before.Object, in.Object); diff != "" {
		t.Errorf("prepare changed its input (-before +after):\n%s", diff)
	}

	clusterScoped := prepare(object(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","namespace":"stray"}}`), "", "w", "")
	if ns, ok := clusterScoped.GetAnnotations()[AnnotationBinding]; ok || clusterScoped.GetNamespace() != "" {
		t.Errorf("cluster-scoped object without binding: namespace %q, binding annotation %q; want neither", clusterScoped.GetNamespace(), ns)
	}
}
