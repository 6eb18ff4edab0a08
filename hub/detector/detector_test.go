package detector

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

type fixture struct {
	t    *testing.T
	objs *objects.Objects
	// bindings delivers every change of a ResourceBinding.
	bindings <-chan store.Event[*v1alpha1.ResourceBinding]
}

func start(t *testing.T) *fixture {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects.New(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { New(objs, slog.New(slog.NewTextHandler(t.Output(), nil))).Run(ctx, 2); close(done) }()
	t.Cleanup(func() { cancel(); <-done; s.Close() })
	return &fixture{t: t, objs: objs, bindings: objs.Bindings.Watch(ctx, "", 0)}
}

func (f *fixture) apply(docs ...string) {
	f.t.Helper()
	var raw []json.RawMessage
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			f.t.Fatal(err)
		}
		raw = append(raw, j)
	}
	if _, err := f.objs.Apply(f.t.Context(), raw, "", false); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) delete(doc string) {
	f.t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.objs.Delete(f.t.Context(), []json.RawMessage{j}, ""); err != nil {
		f.t.Fatal(err)
	}
}

// next waits for the next binding event that satisfies ok.
func (f *fixture) next(ok func(store.Event[*v1alpha1.ResourceBinding]) bool) *v1alpha1.ResourceBinding {
	f.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-f.bindings:
			if ok(ev) {
				return ev.Object
			}
		case <-timeout:
			f.t.Fatal("no matching binding event within 10s")
		}
	}
}

const (
	nginx = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: default, labels: {app: nginx}}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: nginx, image: nginx, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
      initContainers: [{name: init, image: busybox, resources: {requests: {cpu: 500m}}}]`
	byName = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: by-name, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement: {clusterAffinity: {clusterNames: [member1]}}`
	byLabel = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: by-label, namespace: default}
spec:
  priority: 10
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {app: nginx}}}]
  placement: {clusterAffinity: {clusterNames: [member2]}}`
	clusterWide = `apiVersion: flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: everything}
spec:
  priority: 100
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement: {clusterAffinity: {clusterNames: [member3]}}`
)

func placedOn(b *v1alpha1.ResourceBinding) []string {
	if b.Spec.Placement == nil || b.Spec.Placement.ClusterAffinity == nil {
		return nil
	}
	return b.Spec.Placement.ClusterAffinity.ClusterNames
}

func TestDetectorFollowsTemplatesAndPolicies(t *testing.T) {
	f := start(t)
	f.apply(nginx, clusterWide)
	b := f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool { return ev.Type == store.Added })
	if b.Name != "nginx-deployment" || b.Spec.Replicas != 3 || b.Annotations[AnnotationPolicy] != "everything" {
		t.Fatalf("binding %s replicas %d policy %q", b.Name, b.Spec.Replicas, b.Annotations[AnnotationPolicy])
	}
	// Per replica: containers sum 100m, the init container's 500m is more.
	want := map[string]string{"cpu": "500m", "memory": "64Mi"}
	got := map[string]string{}
	for name, q := range b.Spec.ReplicaRequirements.ResourceRequest {
		got[string(name)] = q.String()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requirements (-want +got):\n%s", diff)
	}

	// A PropagationPolicy beats any ClusterPropagationPolicy; among them the
	// higher priority wins over the more specific name selector.
	f.apply(byName)
	b = f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool {
		return ev.Object.Annotations[AnnotationPolicy] == "default/by-name"
	})
	if diff := cmp.Diff([]string{"member1"}, placedOn(b)); diff != "" {
		t.Errorf("placement from by-name (-want +got):\n%s", diff)
	}
	f.apply(byLabel)
	b = f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool {
		return ev.Object.Annotations[AnnotationPolicy] == "default/by-label"
	})
	if b.Generation < 3 {
		t.Errorf("generation %d after two placement changes, want >= 3", b.Generation)
	}

	// Scaling the template changes the binding's replicas.
	f.apply(strings.Replace(nginx, "replicas: 3", "replicas: 9", 1))
	f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool { return ev.Object.Spec.Replicas == 9 })

	// Without the template, the binding goes.
	f.delete(nginx)
	f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool { return ev.Type == store.Deleted })
}

func TestTemplateWithoutPolicyGetsNoBinding(t *testing.T) {
	f := start(t)
	f.apply(strings.Replace(byName, "name: nginx}", "name: other}", 1), nginx)
	f.apply(strings.Replace(nginx, "name: nginx,", "name: other,", 1))
	b := f.next(func(ev store.Event[*v1alpha1.ResourceBinding]) bool { return ev.Type == store.Added })
	if b.Name != "other-deployment" {
		t.Errorf("first binding is %s, want other-deployment (nginx matches no policy)", b.Name)
	}
}
