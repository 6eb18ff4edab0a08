package status

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/hub/templates"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// fixture is a namespace of templates and bindings, clusters with their
// execution namespaces, and a running status controller.
type fixture struct {
	env       *hubapi.Env
	namespace string
	clusters  []string
}

// start creates n clusters (named by the API server: cluster-scoped
// objects are shared by every test of the binary), then starts the status
// controller. At test end it stops, then the Works go with their
// namespaces, then the clusters.
func start(t *testing.T, n int) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t)
	f := &fixture{env: env, namespace: env.Namespace(t)}
	for range n {
		f.clusters = append(f.clusters, controllertest.CreateClusterWithExecutionNamespace(t, env, "member-"))
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	clients, err := kube.NewClients(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds, err := apiextensionsclient.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, templates.New(clients, crds, logger))
	if err != nil {
		t.Fatal(err)
	}
	c := New(clients, informers, controller.DiscardRecorder{}, clock.RealClock{}, logger)
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx, 2) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return f
}

// binding creates a ResourceBinding of a template placed on clusters.
func (f *fixture) binding(t *testing.T, name string, resource v1alpha1.ObjectReference, replicas int32, placed []v1alpha1.TargetCluster) *v1alpha1.ResourceBinding {
	t.Helper()
	b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ResourceBindingSpec{Resource: resource, Replicas: replicas, Clusters: placed}}
	b, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.namespace).Create(t.Context(), b, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// report creates a binding's Work in cluster, rendered for replicas, and
// records on it what an agent reports: applied, with health and status.
func (f *fixture) report(t *testing.T, bindingName, cluster string, replicas int32, health, status string) {
	t.Helper()
	ctx := t.Context()
	key := f.namespace + "/" + bindingName
	works := f.env.Flotilla.FlotillaV1alpha1().Works(v1alpha1.ExecutionNamespace(cluster))
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.WorkName(key, bindingName),
		Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: key, v1alpha1.AnnotationWorkReplicas: fmt.Sprint(replicas)}}}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)}}}
	w, err := works.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Status.ObservedGeneration = w.Generation
	w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAppliedSuccessful, Message: "applied by the agent", LastTransitionTime: metav1.Now()}}
	w.Status.ManifestStatuses = []v1alpha1.ManifestStatus{{Health: health, Status: &runtime.RawExtension{Raw: []byte(status)}}}
	if _, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// await polls until ok holds for the binding.
func (f *fixture) await(t *testing.T, name, what string, ok func(*v1alpha1.ResourceBinding) bool) *v1alpha1.ResourceBinding {
	t.Helper()
	var last *v1alpha1.ResourceBinding
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		b, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = b
		return ok(b), nil
	})
	if err != nil {
		t.Fatalf("binding %s: waiting for %s: %v; last seen: %+v", name, what, err, last)
	}
	return last
}

func fullyAppliedOf(b *v1alpha1.ResourceBinding) *metav1.Condition {
	return meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionFullyApplied)
}

// health lists the aggregated health per cluster.
func health(b *v1alpha1.ResourceBinding) map[string]string {
	out := map[string]string{}
	for _, it := range b.Status.AggregatedStatus {
		out[it.ClusterName] = it.Health
	}
	return out
}

// The binding's status and the Deployment's status are the clusters'
// reports, written through the status subresources: a spec written by
// another controller meanwhile stays as it wrote it.
func TestStatusAggregatesReports(t *testing.T) {
	f := start(t, 2)
	one, two := f.clusters[0], f.clusters[1]
	labels := map[string]string{"app": "web"}
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
		Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}
	deployments := f.env.Kube.AppsV1().Deployments(f.namespace)
	if _, err := deployments.Create(t.Context(), deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.namespace, Name: "web"}
	f.binding(t, "web-deployment", ref, 3, []v1alpha1.TargetCluster{{Name: one, Replicas: 1}, {Name: two, Replicas: 2}})
	f.report(t, "web-deployment", one, 1, v1alpha1.HealthHealthy, `{"replicas":1,"readyReplicas":1,"availableReplicas":1}`)
	f.report(t, "web-deployment", two, 2, v1alpha1.HealthHealthy, `{"replicas":2,"readyReplicas":2,"availableReplicas":1}`)

	b := f.await(t, "web-deployment", "FullyApplied", func(b *v1alpha1.ResourceBinding) bool {
		c := fullyAppliedOf(b)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if diff := cmp.Diff(map[string]string{one: v1alpha1.HealthHealthy, two: v1alpha1.HealthHealthy}, health(b)); diff != "" {
		t.Errorf("aggregated health (-want +got):\n%s", diff)
	}
	var got appsv1.DeploymentStatus
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = d.Status
		return d.Status.ReadyReplicas == 3, nil
	})
	want := appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 2}
	if err != nil || !cmp.Equal(want, got) {
		t.Fatalf("Deployment status: %v (-want +got):\n%s", err, cmp.Diff(want, got))
	}

	// Another controller moves a replica: its spec write stands, and the
	// status says the Works are not rendered for it yet: applying, not
	// failed.
	b.Spec.Clusters = []v1alpha1.TargetCluster{{Name: one, Replicas: 2}, {Name: two, Replicas: 1}}
	if _, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(f.namespace).Update(t.Context(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b = f.await(t, "web-deployment", "FullyApplied=False for the new placement", func(b *v1alpha1.ResourceBinding) bool {
		c := fullyAppliedOf(b)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonFullyAppliedProgress && c.ObservedGeneration == b.Generation
	})
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: one, Replicas: 2}, {Name: two, Replicas: 1}}, b.Spec.Clusters); diff != "" {
		t.Errorf("spec.clusters after the status write (-want +got):\n%s", diff)
	}

	// A cluster whose agent went silent has health Unknown.
	cl, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), two, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&cl.Status.Conditions, metav1.Condition{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown, Reason: "LeaseExpired"})
	if _, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().UpdateStatus(t.Context(), cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.await(t, "web-deployment", "health Unknown in "+two, func(b *v1alpha1.ResourceBinding) bool {
		return health(b)[two] == v1alpha1.HealthUnknown && health(b)[one] == v1alpha1.HealthHealthy
	})
}

// A template whose kind has no status subresource (a ConfigMap) is left
// alone, whatever its binding says.
func TestTemplateWithoutStatusSubresourceIsLeftAlone(t *testing.T) {
	f := start(t, 1)
	cm, err := f.env.Kube.CoreV1().ConfigMaps(f.namespace).Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := v1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.namespace, Name: "settings"}
	// Replicas set, as no detector would for a ConfigMap: the status
	// controller sums statuses for it.
	f.binding(t, "settings-configmap", ref, 2, []v1alpha1.TargetCluster{{Name: f.clusters[0], Replicas: 2}})
	f.report(t, "settings-configmap", f.clusters[0], 2, v1alpha1.HealthHealthy, `{"replicas":2}`)
	f.await(t, "settings-configmap", "FullyApplied", func(b *v1alpha1.ResourceBinding) bool {
		c := fullyAppliedOf(b)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	got, err := f.env.Kube.CoreV1().ConfigMaps(f.namespace).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("ConfigMap written by the status controller: resourceVersion %s, was %s", got.ResourceVersion, cm.ResourceVersion)
	}
}
