package detector

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/hub/templates"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// eventTimeout bounds every wait for the detector.
const eventTimeout = 30 * time.Second

type fixture struct {
	t       *testing.T
	env     *hubapi.Env
	clients *kube.Clients
	ns      string
	// bindings delivers every change of the namespace's ResourceBindings,
	// clusterBindings of every ClusterResourceBinding.
	bindings, clusterBindings <-chan watch.Event
	// placer, if set before start, is the detector's placement.
	placer controller.Placer
}

// newFixture makes a namespace for the test and watches bindings; start
// runs the detector. Cluster-scoped Flotilla objects are deleted at the
// end, so these tests do not run in parallel.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t)
	ns := env.Namespace(t)
	clients, err := kube.NewClients(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, clients: clients, ns: ns}
	rbs, err := env.Flotilla.FlotillaV1alpha1().ResourceBindings(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rbs.Stop)
	crbs, err := env.Flotilla.FlotillaV1alpha1().ClusterResourceBindings().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(crbs.Stop)
	f.bindings, f.clusterBindings = rbs.ResultChan(), crbs.ResultChan()
	return f
}

// start runs a detector (with its template Source and shared informers)
// with workers until the test ends; it stops before the namespace goes.
func (f *fixture) start(workers int) {
	f.t.Helper()
	f.startWith(workers, controller.DiscardRecorder{})
}

// startWith is start with the detector's events going to recorder.
func (f *fixture) startWith(workers int, recorder controller.Recorder) {
	f.t.Helper()
	logger := slog.New(slog.NewTextHandler(f.t.Output(), nil))
	crds, err := apiextensionsclient.NewForConfig(f.env.RESTConfig())
	if err != nil {
		f.t.Fatal(err)
	}
	source := templates.New(f.clients, crds, logger)
	informers, err := controller.NewInformers(f.clients, source)
	if err != nil {
		f.t.Fatal(err)
	}
	d := New(f.clients, informers, recorder, clock.RealClock{}, logger)
	d.SetPlacer(f.placer)
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	source.Start(ctx)
	done := make(chan struct{})
	go func() { d.Run(ctx, workers); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// object decodes a YAML document into the test's namespace (documents say
// "namespace: default").
func (f *fixture) object(doc string) *unstructured.Unstructured {
	f.t.Helper()
	j, err := yaml.YAMLToJSON([]byte(strings.ReplaceAll(doc, "namespace: default", "namespace: "+f.ns)))
	if err != nil {
		f.t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		f.t.Fatal(err)
	}
	return u
}

// resource is the dynamic client of u's kind and namespace.
func (f *fixture) resource(u *unstructured.Unstructured) dynamic.ResourceInterface {
	f.t.Helper()
	gvk := u.GroupVersionKind()
	m, err := f.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		f.t.Fatal(err)
	}
	if u.GetNamespace() == "" {
		return f.env.Dynamic.Resource(m.Resource)
	}
	return f.env.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace())
}

// apply creates or updates every document, as kubectl apply would.
func (f *fixture) apply(docs ...string) {
	f.t.Helper()
	for _, doc := range docs {
		u := f.object(doc)
		r := f.resource(u)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			stored, err := r.Get(f.t.Context(), u.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = r.Create(f.t.Context(), u, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			u.SetResourceVersion(stored.GetResourceVersion())
			_, err = r.Update(f.t.Context(), u, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			f.t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func (f *fixture) delete(doc string) {
	f.t.Helper()
	u := f.object(doc)
	if err := f.resource(u).Delete(f.t.Context(), u.GetName(), metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("delete %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// next waits for the next ResourceBinding event that satisfies ok.
func (f *fixture) next(ok func(watch.EventType, *v1alpha1.ResourceBinding) bool) *v1alpha1.ResourceBinding {
	f.t.Helper()
	return nextOf(f.t, f.bindings, ok)
}

// nextCluster waits for the next ClusterResourceBinding event that
// satisfies ok.
func (f *fixture) nextCluster(ok func(watch.EventType, *v1alpha1.ClusterResourceBinding) bool) *v1alpha1.ClusterResourceBinding {
	f.t.Helper()
	return nextOf(f.t, f.clusterBindings, ok)
}

func nextOf[PT any](t *testing.T, events <-chan watch.Event, ok func(watch.EventType, PT) bool) PT {
	t.Helper()
	timeout := time.NewTimer(eventTimeout)
	defer timeout.Stop()
	for {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatal("binding watch closed")
			}
			if obj, isPT := ev.Object.(PT); isPT && ok(ev.Type, obj) {
				return obj
			}
		case <-timeout.C:
			t.Fatalf("no matching binding event within %v", eventTimeout)
		}
	}
}

func added[PT any](ev watch.EventType, _ PT) bool   { return ev == watch.Added }
func deleted[PT any](ev watch.EventType, _ PT) bool { return ev == watch.Deleted }

const (
	nginx = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: default, labels: {app: nginx}}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers: [{name: nginx, image: nginx, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
      initContainers: [{name: init, image: busybox, resources: {requests: {cpu: 500m}}}]`
	byName = `apiVersion: flotilla.io/v1alpha1
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
	f := newFixture(t)
	f.start(2)
	f.apply(nginx, clusterWide)
	b := f.next(added)
	if b.Name != "nginx-deployment" || b.Spec.Replicas != 3 || b.Annotations[names.AnnotationPolicy] != "everything" {
		t.Fatalf("binding %s replicas %d policy %q", b.Name, b.Spec.Replicas, b.Annotations[names.AnnotationPolicy])
	}
	if want := "apps/Deployment/" + f.ns + "/nginx"; b.Annotations[names.AnnotationTemplate] != want {
		t.Errorf("template annotation %q, want %q", b.Annotations[names.AnnotationTemplate], want)
	}
	wantResource := v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.ns, Name: "nginx"}
	gotResource := b.Spec.Resource
	gotResource.UID, gotResource.ResourceVersion = "", ""
	if diff := cmp.Diff(wantResource, gotResource); diff != "" || b.Spec.Resource.UID == "" {
		t.Errorf("resource (-want +got):\n%s (uid %q)", diff, b.Spec.Resource.UID)
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
	b = f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool {
		return b.Annotations[names.AnnotationPolicy] == f.ns+"/by-name"
	})
	if diff := cmp.Diff([]string{"member1"}, placedOn(b)); diff != "" {
		t.Errorf("placement from by-name (-want +got):\n%s", diff)
	}
	f.apply(byLabel)
	b = f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool {
		return b.Annotations[names.AnnotationPolicy] == f.ns+"/by-label"
	})
	if b.Generation < 3 {
		t.Errorf("generation %d after two placement changes, want >= 3", b.Generation)
	}

	// Scaling the template changes the binding's replicas.
	f.apply(strings.Replace(nginx, "replicas: 3", "replicas: 9", 1))
	f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool { return b.Spec.Replicas == 9 })

	// Without the template, the binding goes.
	f.delete(nginx)
	f.next(deleted)
}

// TestBindingCreatedPlaced: with the scheduler's placement, a binding is
// created already placed (one write); a later change of the detector's
// part of the spec keeps the placement; with no placement to be had, the
// binding is created unplaced for the scheduler.
func TestBindingCreatedPlaced(t *testing.T) {
	tests := []struct {
		name   string
		placed []v1alpha1.TargetCluster // the placer's answer; nil: none
	}{
		{"placed", []v1alpha1.TargetCluster{{Name: "member3", Replicas: 3}}},
		{"nowhere to go", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.placer = func(key string, generation int64, spec *v1alpha1.ResourceBindingSpec, _ *v1alpha1.ResourceBindingStatus) ([]v1alpha1.TargetCluster, bool) {
				if spec.Replicas != 3 || placedOn(&v1alpha1.ResourceBinding{Spec: *spec}) == nil {
					t.Errorf("placer asked about replicas %d, placement %v: want the detector's spec", spec.Replicas, spec.Placement)
				}
				if !strings.HasSuffix(key, "/nginx-deployment") || generation != 1 {
					t.Errorf("placer asked about %s, generation %d: want the binding nginx-deployment as created", key, generation)
				}
				return tt.placed, tt.placed != nil
			}
			f.start(1)
			f.apply(nginx, clusterWide)
			b := f.next(added)
			if diff := cmp.Diff(tt.placed, b.Spec.Clusters); diff != "" || b.Generation != 1 {
				t.Errorf("created with generation %d, clusters (-want +got):\n%s", b.Generation, diff)
			}
			f.apply(strings.Replace(nginx, "replicas: 3", "replicas: 9", 1))
			b = f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool { return b.Spec.Replicas == 9 })
			if diff := cmp.Diff(tt.placed, b.Spec.Clusters); diff != "" {
				t.Errorf("clusters after a scale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplateWithoutPolicyGetsNoBinding(t *testing.T) {
	f := newFixture(t)
	f.start(2)
	f.apply(strings.Replace(byName, "name: nginx}", "name: other}", 1), nginx)
	f.apply(strings.Replace(nginx, "name: nginx,", "name: other,", 1))
	b := f.next(added)
	if b.Name != "other-deployment" {
		t.Errorf("first binding is %s, want other-deployment (nginx matches no policy)", b.Name)
	}
}

func TestClusterScopedTemplateGetsClusterBinding(t *testing.T) {
	f := newFixture(t)
	f.start(2)
	name := strings.TrimSuffix(f.ns, "-") + "-reader" // unique to the test
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ` + name + `}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]`
	f.apply(role, `apiVersion: flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: roles}
spec:
  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, name: `+name+`}]
  placement: {clusterAffinity: {clusterNames: [member1]}}`)
	b := f.nextCluster(added)
	if b.Name != name+"-clusterrole" || b.Annotations[names.AnnotationPolicy] != "roles" || b.Spec.Replicas != 0 {
		t.Errorf("cluster binding %s policy %q replicas %d, want %s-clusterrole, roles, 0", b.Name, b.Annotations[names.AnnotationPolicy], b.Spec.Replicas, name)
	}
	if b.Spec.Resource.Kind != "ClusterRole" || b.Spec.Resource.Namespace != "" || b.Spec.Resource.Name != name {
		t.Errorf("cluster binding resource %+v", b.Spec.Resource)
	}
	f.delete(role)
	f.nextCluster(deleted)
}

// TestBindingIsPutRight: the detector's part of a binding is restored after
// someone else changes or deletes it, and the scheduler's part is kept.
func TestBindingIsPutRight(t *testing.T) {
	f := newFixture(t)
	f.start(2)
	f.apply(nginx, byName)
	b := f.next(added)
	bindings := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.ns)

	// The scheduler's result stays through a template change.
	b.Spec.Clusters = []v1alpha1.TargetCluster{{Name: "member1", Replicas: 3}}
	b.Spec.Placement.ClusterAffinity.ClusterNames = []string{"elsewhere"} // not the scheduler's to change
	if _, err := bindings.Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b = f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool {
		return cmp.Equal(placedOn(b), []string{"member1"}) && len(b.Spec.Clusters) > 0
	})
	f.apply(strings.Replace(nginx, "replicas: 3", "replicas: 4", 1))
	b = f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool { return b.Spec.Replicas == 4 })
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member1", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("clusters after a template change (-want +got):\n%s", diff)
	}

	// Deleted by hand: made again.
	if err := bindings.Delete(t.Context(), b.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.next(deleted)
	again := f.next(added)
	if again.UID == b.UID || again.Spec.Replicas != 4 {
		t.Errorf("binding made again: uid %s (was %s), replicas %d", again.UID, b.UID, again.Spec.Replicas)
	}
}

func TestDeletedPolicyLeavesBinding(t *testing.T) {
	f := newFixture(t)
	f.start(1) // one worker: keys are reconciled in the order they were queued
	f.apply(nginx, byName)
	f.next(added)
	f.delete(byName)
	// Once the binding of a template that needs a later policy appears,
	// the deletion has been handled: nginx's binding must still be there.
	other := strings.Replace(nginx, "name: nginx,", "name: other,", 1)
	f.apply(other, strings.NewReplacer("name: by-name", "name: for-other", "name: nginx}", "name: other}").Replace(byName))
	b := f.next(func(ev watch.EventType, b *v1alpha1.ResourceBinding) bool {
		if ev == watch.Deleted {
			t.Errorf("binding %s deleted with its policy", b.Name)
		}
		return ev == watch.Added
	})
	if b.Name != "other-deployment" {
		t.Errorf("added binding %s, want other-deployment", b.Name)
	}
	if _, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.ns).Get(t.Context(), "nginx-deployment", metav1.GetOptions{}); err != nil {
		t.Errorf("binding of nginx after its policy was deleted: %v", err)
	}

	// A new matching policy takes the binding over.
	f.apply(strings.Replace(byName, "name: by-name", "name: successor", 1))
	f.next(func(_ watch.EventType, b *v1alpha1.ResourceBinding) bool {
		return b.Name == "nginx-deployment" && b.Annotations[names.AnnotationPolicy] == f.ns+"/successor"
	})
}

// TestBindingOfVanishedTemplateGoesAtStart: a template deleted while the
// hub was down takes its binding with it when the detector starts; a
// binding whose template is there, or that the detector did not make, stays.
func TestBindingOfVanishedTemplateGoesAtStart(t *testing.T) {
	f := newFixture(t)
	f.apply(nginx, byName)
	bindings := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.ns)
	make := func(name, template string) {
		t.Helper()
		b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
		if template != "" {
			b.Annotations = map[string]string{names.AnnotationTemplate: template, names.AnnotationPolicy: f.ns + "/by-name"}
		}
		if _, err := bindings.Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	make("gone-deployment", "apps/Deployment/"+f.ns+"/gone")
	make("mine-deployment", "")
	f.start(2)
	// The deletion and nginx's binding come in either order: wait for both.
	var deleted []string
	nginxBound := false
	f.next(func(ev watch.EventType, b *v1alpha1.ResourceBinding) bool {
		switch {
		case ev == watch.Deleted:
			deleted = append(deleted, b.Name)
		case ev == watch.Added && b.Name == "nginx-deployment":
			nginxBound = true
		}
		return len(deleted) > 0 && nginxBound
	})
	if len(deleted) != 1 || deleted[0] != "gone-deployment" {
		t.Errorf("deleted %v, want gone-deployment", deleted)
	}
	for _, name := range []string{"nginx-deployment", "mine-deployment"} {
		if _, err := bindings.Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("binding %s: %v", name, err)
		}
	}
}

// TestTemplateBeingDeletedLosesBinding: a template held by a finalizer
// (nothing on the hub removes it) is gone for propagation once deleted.
func TestTemplateBeingDeletedLosesBinding(t *testing.T) {
	f := newFixture(t)
	f.start(2)
	held := `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default, finalizers: [example.com/hold]}
data: {a: "1"}`
	f.apply(held, `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: settings, namespace: default}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: settings}]
  placement: {clusterAffinity: {clusterNames: [member1]}}`)
	b := f.next(added)
	if b.Name != "settings-configmap" {
		t.Fatalf("binding %s, want settings-configmap", b.Name)
	}
	f.delete(held)
	f.next(deleted)
	cm, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Errorf("ConfigMap: %v, deletionTimestamp %v; want it held", err, cm.GetDeletionTimestamp())
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := f.env.Kube.CoreV1().ConfigMaps(f.ns).Patch(t.Context(), "settings", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// recorder keeps the events the detector records.
type recorder struct {
	events chan string // "Type Reason Kind namespace/name: message"
}

func (r *recorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	select {
	case r.events <- eventType + " " + reason + " " + ref.Kind + " " + controller.Key(ref.Namespace, ref.Name) + ": " + message:
	default:
	}
}

// TestBindingNameTakenByAnotherKind: two templates whose names and kinds
// give one binding name (kinds of different groups) do not fight over it:
// the first keeps it, the second gets a warning event.
func TestBindingNameTakenByAnotherKind(t *testing.T) {
	group := "t" + strings.ToLower(rand.String(6)) + ".example.com"
	// Before the namespace, so that it goes after it.
	createCRD(t, hubapi.Start(t), &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "deployments." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "deployments", Singular: "deployment", Kind: "Deployment", ListKind: "DeploymentList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	})
	f := newFixture(t)
	events := &recorder{events: make(chan string, 100)}
	f.startWith(2, events)
	f.apply(nginx, `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: both, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}, {apiVersion: `+group+`/v1, kind: Deployment}]
  placement: {clusterAffinity: {clusterNames: [member1]}}`)
	first := f.next(added)

	// The custom kind's objects can be created once the API server serves it.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": f.ns, "name": "nginx"},
	}}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "deployments"}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := f.env.Dynamic.Resource(gvr).Namespace(f.ns).Create(ctx, other, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create %s Deployment: %v", group, err)
	}
	want := "Warning BindingNameTaken Deployment " + f.ns + "/nginx"
	timeout := time.After(eventTimeout)
	for found := false; !found; {
		select {
		case ev := <-events.events:
			found = strings.HasPrefix(ev, want)
		case <-timeout:
			t.Fatalf("no event %q within %v", want, eventTimeout)
		}
	}
	b, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.ns).Get(t.Context(), first.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Annotations[names.AnnotationTemplate] != "apps/Deployment/"+f.ns+"/nginx" || b.Spec.Resource.APIVersion != "apps/v1" {
		t.Errorf("binding %s now for %s (%s), want it kept for apps/v1 nginx", b.Name, b.Annotations[names.AnnotationTemplate], b.Spec.Resource.APIVersion)
	}
}

// createCRD creates crd and deletes it when the test ends, waiting until
// the API server no longer serves it (a later test's clean-up lists every
// resource discovery names).
func createCRD(t *testing.T, env *hubapi.Env, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	crds, err := apiextensionsclient.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	api := crds.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := api.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
		defer cancel()
		if err := api.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", crd.Name, err)
			return
		}
		gv := crd.Spec.Group + "/" + crd.Spec.Versions[0].Name
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, eventTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err = env.Kube.Discovery().ServerResourcesForGroupVersion(gv)
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("CRD %s still served: %v", crd.Name, err)
		}
	})
}
