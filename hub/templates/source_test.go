package templates

import (
	"context"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/names"
)

var (
	configMapKind  = schema.GroupKind{Kind: "ConfigMap"}
	deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}
)

func deployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
}

func TestExistingTemplatesAreListed(t *testing.T) {
	f := newFixture(t)
	ns := f.env.Namespace(t)
	ctx := t.Context()
	if _, err := f.env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "settings", map[string]string{"a": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Kube.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "templates-test-"}}
	role, err := f.env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	f.start(t)

	keys := map[string]string{
		names.TemplateKeyFor(configMapKind, ns, "settings"):                                                            "v1",
		names.TemplateKeyFor(deploymentKind, ns, "web"):                                                                "apps/v1",
		names.TemplateKeyFor(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, "", role.Name): "rbac.authorization.k8s.io/v1",
		names.TemplateKeyFor(namespaceKind, "", ns):                                                                    "v1",
	}
	listed := map[string]bool{}
	for _, u := range f.source.List() {
		listed[names.TemplateKey(u)] = true
	}
	for key, apiVersion := range keys {
		u := f.source.Get(key)
		if u == nil {
			t.Errorf("Get(%q) = nil", key)
			continue
		}
		if names.TemplateKey(u) != key || u.GetAPIVersion() != apiVersion {
			t.Errorf("Get(%q) is %s in %s, want %s", key, names.TemplateKey(u), u.GetAPIVersion(), apiVersion)
		}
		if u.GetManagedFields() != nil {
			t.Errorf("Get(%q) keeps managedFields", key)
		}
		if !listed[key] {
			t.Errorf("List misses %s", key)
		}
		if _, n := f.events.wait(t, 0, "added "+key, added(key)); n == 0 {
			t.Errorf("no add of %s", key)
		}
	}

	resources := f.source.Resources()
	for _, want := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "namespaces"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	} {
		if !slices.Contains(resources, want) {
			t.Errorf("Resources() misses %s", want)
		}
	}
	for _, gvr := range resources {
		if excludedResource(gvr.GroupResource()) {
			t.Errorf("Resources() has %s, of an excluded group", gvr)
		}
	}
}

func TestHandlersHearAddUpdateDelete(t *testing.T) {
	f := newFixture(t)
	ns := f.env.Namespace(t)
	f.start(t)
	ctx := t.Context()
	configMaps := f.env.Kube.CoreV1().ConfigMaps(ns)
	key := names.TemplateKeyFor(configMapKind, ns, "settings")

	cm, err := configMaps.Create(ctx, configMap(ns, "settings", map[string]string{"a": "1"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, pos := f.events.wait(t, 0, "added "+key, added(key))
	if ev.cur.GetResourceVersion() != cm.ResourceVersion {
		t.Errorf("added at resourceVersion %s, want %s", ev.cur.GetResourceVersion(), cm.ResourceVersion)
	}
	if got := f.source.Get(key); got != ev.cur {
		t.Errorf("Get(%q) after the add is not the object handlers heard of", key)
	}

	cm.Data["a"] = "2"
	cm, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, pos = f.events.wait(t, pos, "updated "+key, updated(key, func(_, cur *unstructured.Unstructured) bool {
		return cur.GetResourceVersion() == cm.ResourceVersion
	}))
	wantData := func(u *unstructured.Unstructured) map[string]string {
		data, _, _ := unstructured.NestedStringMap(u.Object, "data")
		return data
	}
	if diff := cmp.Diff(map[string]string{"a": "1"}, wantData(ev.old)); diff != "" {
		t.Errorf("old of the update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "2"}, wantData(ev.cur)); diff != "" {
		t.Errorf("cur of the update (-want +got):\n%s", diff)
	}
	if got := f.source.Get(key); got != ev.cur {
		t.Errorf("Get(%q) after the update is not the object handlers heard of", key)
	}

	if err := configMaps.Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev, _ = f.events.wait(t, pos, "deleted "+key, deleted(key))
	if ev.old.GetResourceVersion() != cm.ResourceVersion {
		t.Errorf("deleted object at resourceVersion %s, want the last one, %s", ev.old.GetResourceVersion(), cm.ResourceVersion)
	}
	if got := f.source.Get(key); got != nil {
		t.Errorf("Get(%q) after the delete = %v, want nil", key, got)
	}
}

func TestHubObjectsAreNotTemplates(t *testing.T) {
	f := newFixture(t)
	ns := f.env.Namespace(t)
	ctx := t.Context()
	kubeNS := f.systemNamespace(t, "kube-templates-")
	flotillaNS := f.systemNamespace(t, "flotilla-es-templates-")
	for _, n := range []string{kubeNS, flotillaNS} {
		if _, err := f.env.Kube.CoreV1().ConfigMaps(n).Create(ctx, configMap(n, "hidden", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lease"}}
	if _, err := f.env.Kube.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "event"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "x"}, Reason: "Test", Type: corev1.EventTypeNormal}
	if _, err := f.env.Kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policy := &v1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policy"},
		Spec: v1alpha1.PropagationSpec{ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}}}}
	if _, err := f.env.Flotilla.FlotillaV1alpha1().PropagationPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.start(t)

	for _, u := range f.source.List() {
		gk := u.GroupVersionKind().GroupKind()
		switch {
		case excludedNamespace(u.GetNamespace()):
			t.Errorf("listed %s, in a namespace of the hub", names.TemplateKey(u))
		case gk == namespaceKind && excludedNamespace(u.GetName()):
			t.Errorf("listed namespace %s, one of the hub's", u.GetName())
		case excludedGroups[gk.Group] || gk.Group == "" && gk.Kind == "Event":
			t.Errorf("listed %s, of a kind that holds no templates", names.TemplateKey(u))
		case gk == crdKind && strings.HasSuffix(u.GetName(), "flotilla.io"):
			t.Errorf("listed %s, a CRD the hub installs", names.TemplateKey(u))
		}
	}
	for _, key := range []string{
		names.TemplateKeyFor(configMapKind, kubeNS, "hidden"),
		names.TemplateKeyFor(configMapKind, flotillaNS, "hidden"),
		names.TemplateKeyFor(namespaceKind, "", kubeNS),
		names.TemplateKeyFor(namespaceKind, "", "kube-system"),
		names.TemplateKeyFor(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, ns, "lease"),
		names.TemplateKeyFor(schema.GroupKind{Kind: "Event"}, ns, "event"),
		names.TemplateKeyFor(schema.GroupKind{Group: v1alpha1.GroupName, Kind: "PropagationPolicy"}, ns, "policy"),
		names.TemplateKeyFor(crdKind, "", "clusters.flotilla.io"),
	} {
		if u := f.source.Get(key); u != nil {
			t.Errorf("Get(%q) found the hub's own object", key)
		}
	}

	// Later changes too: a ConfigMap in a hub namespace, then one in the
	// test's, which the same watch delivers after it.
	if _, err := f.env.Kube.CoreV1().ConfigMaps(kubeNS).Create(ctx, configMap(kubeNS, "later", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "marker", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.events.wait(t, 0, "added marker", added(names.TemplateKeyFor(configMapKind, ns, "marker")))
	for _, e := range f.events.all() {
		if u := e.cur; u != nil && excludedNamespace(u.GetNamespace()) {
			t.Errorf("handlers heard of %s", e)
		}
	}
}

// createWidget creates a Widget, waiting out the API server's start of a
// new CRD (creates are refused, then held, for a moment).
func (f *fixture) createWidget(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: crd.Spec.Names.Plural}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1", "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"namespace": namespace, "name": name},
		"spec":     map[string]any{"size": int64(3)},
	}}
	var created *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		created, err = f.env.Dynamic.Resource(gvr).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create %s %s: %v", crd.Spec.Names.Kind, name, err)
	}
	return created
}

// updateCRD changes the CRD with change, retrying conflicts.
func (f *fixture) updateCRD(t *testing.T, name string, change func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	api := f.crds.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := api.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(crd)
		_, err = api.Update(t.Context(), crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update CRD %s: %v", name, err)
	}
}

func TestCustomResourcesFollowTheirCRD(t *testing.T) {
	f := newFixture(t)
	ns := f.env.Namespace(t)
	f.start(t)

	// A CRD created at run time: its objects are templates once it is
	// Established.
	crd := f.widgetCRD(t)
	widgets := schema.GroupResource{Group: crd.Spec.Group, Resource: "widgets"}
	created := f.createWidget(t, crd, ns, "w1")
	key := names.TemplateKey(created)
	ev, pos := f.events.wait(t, 0, "added "+key, added(key))
	if ev.cur.GetAPIVersion() != crd.Spec.Group+"/v1" {
		t.Errorf("added in %s, want %s/v1", ev.cur.GetAPIVersion(), crd.Spec.Group)
	}
	if !slices.Contains(f.source.Resources(), widgets.WithVersion("v1")) {
		t.Errorf("Resources() = %v, want %s among them", f.source.Resources(), widgets.WithVersion("v1"))
	}

	// A higher version served: the objects are read in it, as updates.
	f.updateCRD(t, crd.Name, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v2", Served: true, Schema: anySchema()})
	})
	_, pos = f.events.wait(t, pos, "updated "+key+" to v2", updated(key, func(old, cur *unstructured.Unstructured) bool {
		return old.GetAPIVersion() == crd.Spec.Group+"/v1" && cur.GetAPIVersion() == crd.Spec.Group+"/v2"
	}))
	if got := f.source.Get(key); got == nil || got.GetAPIVersion() != crd.Spec.Group+"/v2" {
		t.Errorf("Get(%q) = %v, want it in v2", key, got)
	}
	for _, e := range f.events.all() {
		if deleted(key)(e) {
			t.Errorf("a new version made handlers hear %s", e)
		}
	}

	// No version served: the objects are gone, though still stored.
	f.updateCRD(t, crd.Name, func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Served = false
		}
	})
	_, pos = f.events.wait(t, pos, "deleted "+key+" (not served)", deleted(key))
	if got := f.source.Get(key); got != nil {
		t.Errorf("Get(%q) of a kind no longer served = %v, want nil", key, got)
	}
	for _, gvr := range f.source.Resources() {
		if gvr.GroupResource() == widgets {
			t.Errorf("Resources() still has %s", gvr)
		}
	}

	// Served again: back.
	f.updateCRD(t, crd.Name, func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Served = true })
	_, pos = f.events.wait(t, pos, "added "+key+" (served again)", added(key))

	// The CRD deleted: its objects are gone.
	if err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Delete(t.Context(), crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.events.wait(t, pos, "deleted "+key+" (CRD deleted)", deleted(key))
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return !slices.ContainsFunc(f.source.Resources(), func(gvr schema.GroupVersionResource) bool { return gvr.GroupResource() == widgets }), nil
	})
	if err != nil {
		t.Errorf("Resources() still has %s after its CRD was deleted: %v", widgets, err)
	}
	if got := f.source.Get(key); got != nil {
		t.Errorf("Get(%q) after the CRD was deleted = %v, want nil", key, got)
	}
}

// TestFootprint reports what the Source costs on an API server holding
// only what it starts with (the figures in the package doc).
func TestFootprint(t *testing.T) {
	f := newFixture(t)
	before := memory(t)
	began := time.Now()
	f.start(t)
	took := time.Since(began)
	after := memory(t)
	t.Logf("%d informers (%d templates) synced in %v; heap %+.1f MiB (%.1f → %.1f), RSS %+.1f MiB (%.1f → %.1f)",
		len(f.source.Resources()), len(f.source.List()), took.Round(time.Millisecond),
		after.heap-before.heap, before.heap, after.heap, after.rss-before.rss, before.rss, after.rss)
	if len(f.source.Resources()) == 0 {
		t.Error("no informers")
	}
}

type footprint struct{ heap, rss float64 } // MiB

func memory(t *testing.T) footprint {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return footprint{heap: float64(ms.HeapAlloc) / (1 << 20), rss: rss(t)}
}
