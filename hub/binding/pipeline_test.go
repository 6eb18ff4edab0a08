package binding_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/hub/scheduling"
	"github.com/flotilla-io/flotilla/hub/templates"
	"github.com/flotilla-io/flotilla/internal/apiwrites"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// pipeline runs the detector, the scheduling and the binding controllers
// over a real API server, on shared informers, as the hub does. Templates
// and policies live in a namespace of the test's own.
type pipeline struct {
	tb        testing.TB
	env       *hubapi.Env
	namespace string
	clusters  []string
	stop      func() // stops the controllers and waits for them; idempotent
	waits     waitLog
	// writes counts the controllers' API writes (their clients' transport).
	writes *apiwrites.Tally
}

// waitLog is what the binding controller's WaitObserver was told.
type waitLog struct {
	mu      sync.Mutex
	waiting []int // the counts, in order
	waited  []time.Duration
}

func (l *waitLog) observer() binding.WaitObserver {
	return binding.WaitObserver{
		Waiting: func(n int) { l.mu.Lock(); l.waiting = append(l.waiting, n); l.mu.Unlock() },
		Waited:  func(d time.Duration) { l.mu.Lock(); l.waited = append(l.waited, d); l.mu.Unlock() },
	}
}

func (l *waitLog) snapshot() ([]int, []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.waiting), slices.Clone(l.waited)
}

// startPipeline creates the clusters (if missing) and starts the
// controllers. When the test ends the controllers stop, then the Works of
// the clusters go with their namespaces, then the clusters.
func startPipeline(tb testing.TB, clusters ...string) *pipeline {
	tb.Helper()
	env := hubapi.Start(tb)
	env.Cleanup(tb)
	p := &pipeline{tb: tb, env: env, namespace: env.Namespace(tb), clusters: clusters, writes: &apiwrites.Tally{}}
	for _, name := range clusters {
		_, err := env.Flotilla.FlotillaV1alpha1().Clusters().Create(tb.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(p.deleteWorks)

	logger := slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	config := env.RESTConfig()
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return apiwrites.Transport(rt, p.writes.Observe) })
	clients, err := kube.NewClients(config)
	if err != nil {
		tb.Fatal(err)
	}
	crds, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		tb.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, templates.New(clients, crds, logger))
	if err != nil {
		tb.Fatal(err)
	}
	recorder, clk := controller.DiscardRecorder{}, clock.RealClock{}
	det := detector.New(clients, informers, recorder, clk, logger)
	sched := scheduling.New(clients, informers, recorder, clk, logger)
	det.SetPlacer(sched.Place) // as the hub wires them
	bind := binding.New(clients, informers, recorder, clk, logger)
	bind.SetWaitObserver(p.waits.observer())
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { det.Run(ctx, controller.DefaultWorkers) })
	wg.Go(func() { sched.Run(ctx, controller.DefaultWorkers) })
	wg.Go(func() { bind.Run(ctx, controller.DefaultWorkers) })
	p.stop = sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})
	tb.Cleanup(p.stop)
	return p
}

// deleteWorks deletes the execution namespaces of the clusters with every
// Work in them, finalizers cleared (no agent confirms anything here), and
// waits until they are gone. The controllers must have stopped.
func (p *pipeline) deleteWorks() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, cluster := range p.clusters {
		wg.Go(func() {
			if err := deleteExecutionNamespace(ctx, p.env, v1alpha1.ExecutionNamespace(cluster)); err != nil {
				p.tb.Errorf("clean-up of cluster %s: %v", cluster, err)
			}
		})
	}
	wg.Wait()
}

// deleteExecutionNamespace deletes every Work of namespace, finalizers
// cleared, then the namespace (finalized: no namespace controller runs),
// and waits until it is gone.
func deleteExecutionNamespace(ctx context.Context, env *hubapi.Env, namespace string) error {
	works := env.Flotilla.FlotillaV1alpha1().Works(namespace)
	list, err := works.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if err := works.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	clear := []byte(`{"metadata":{"finalizers":null}}`)
	errs := make(chan error, len(list.Items))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := i; j < len(list.Items); j += 8 {
				_, err := works.Patch(ctx, list.Items[j].Name, types.MergePatchType, clear, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("clear finalizers: %w", err)
	}
	namespaces := env.Kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, namespace, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := namespaces.Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			if _, err := namespaces.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return false, err
			}
		}
		return false, nil
	})
}

// resources maps the kinds the tests apply to their resources.
var resources = map[string]schema.GroupVersionResource{
	"Deployment":        {Group: "apps", Version: "v1", Resource: "deployments"},
	"ConfigMap":         {Version: "v1", Resource: "configmaps"},
	"PropagationPolicy": {Group: v1alpha1.GroupName, Version: v1alpha1.Version, Resource: "propagationpolicies"},
}

// apply applies documents (YAML) in the test's namespace with server-side
// apply, as `kubectl apply --server-side` would.
func (p *pipeline) apply(docs ...string) {
	p.tb.Helper()
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			p.tb.Fatal(err)
		}
		gvr, ok := resources[u.GetKind()]
		if !ok {
			p.tb.Fatalf("apply: no resource for kind %s", u.GetKind())
		}
		u.SetNamespace(p.namespace)
		_, err := p.env.Dynamic.Resource(gvr).Namespace(p.namespace).Apply(p.tb.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "test", Force: true})
		if err != nil {
			p.tb.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// bindingKey is the key of a template's binding in the test's namespace.
func (p *pipeline) bindingKey(name, kind string) string {
	return p.namespace + "/" + names.BindingName(name, kind)
}

// worksOf lists the Works of a binding, by cluster.
func (p *pipeline) worksOf(ctx context.Context, bindingKey string) (map[string]*v1alpha1.Work, error) {
	list, err := p.env.Flotilla.FlotillaV1alpha1().Works("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]*v1alpha1.Work{}
	for i := range list.Items {
		w := &list.Items[i]
		if w.Annotations[v1alpha1.AnnotationWorkBinding] == bindingKey {
			out[strings.TrimPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix)] = w
		}
	}
	return out, nil
}

// replicasIn reads spec.replicas of the Work's manifest.
func replicasIn(t testing.TB, w *v1alpha1.Work) int64 {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

// awaitWorks waits until the binding's live Works (not being deleted) have
// exactly the wanted replicas per cluster, and its Works being deleted are
// exactly those of the clusters in wantDeleting.
func (p *pipeline) awaitWorks(bindingKey string, want map[string]int64, wantDeleting ...string) map[string]*v1alpha1.Work {
	p.tb.Helper()
	wantDead := map[string]bool{}
	for _, c := range wantDeleting {
		wantDead[c] = true
	}
	var works map[string]*v1alpha1.Work
	got, dead := map[string]int64{}, map[string]bool{}
	err := wait.PollUntilContextTimeout(p.tb.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if works, err = p.worksOf(ctx, bindingKey); err != nil {
			return false, err
		}
		got, dead = map[string]int64{}, map[string]bool{}
		for cluster, w := range works {
			if w.DeletionTimestamp != nil {
				dead[cluster] = true
			} else {
				got[cluster] = replicasIn(p.tb, w)
			}
		}
		return cmp.Equal(want, got) && cmp.Equal(wantDead, dead), nil
	})
	if err != nil {
		p.tb.Fatalf("Works of %s per cluster: want %v and deleting %v, have %v and %v (%v)", bindingKey, want, wantDeleting, got, dead, err)
	}
	return works
}

// awaitWork waits until the binding's Work in cluster satisfies ok.
func (p *pipeline) awaitWork(bindingKey, cluster, what string, ok func(*v1alpha1.Work) bool) *v1alpha1.Work {
	p.tb.Helper()
	_, name, _ := strings.Cut(bindingKey, "/")
	works := p.env.Flotilla.FlotillaV1alpha1().Works(v1alpha1.ExecutionNamespace(cluster))
	var last *v1alpha1.Work
	err := wait.PollUntilContextTimeout(p.tb.Context(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := works.Get(ctx, names.WorkName(bindingKey, name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = w
		return ok(w), nil
	})
	if err != nil {
		p.tb.Fatalf("Work of %s in %s: timed out waiting for %s (%v); last seen: %+v", bindingKey, cluster, what, err, last)
	}
	return last
}

const (
	nginx = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: nginx:1.27}]}`
	weighted = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member1]}, weight: 1}
          - {targetCluster: {clusterNames: [member2]}, weight: 2}`
)

// onlyOn moves the weighted placement to one cluster.
func onlyOn(cluster string) string {
	return strings.Replace(strings.Replace(weighted, "clusterNames: [member1, member2]", "clusterNames: ["+cluster+"]", 1),
		"clusterNames: [member1]}", "clusterNames: ["+cluster+"]}", 1)
}

func TestSeedExampleBecomesWorks(t *testing.T) {
	p := startPipeline(t, "member1", "member2", "member3")
	p.apply(nginx, weighted)
	key := p.bindingKey("nginx", "Deployment")
	works := p.awaitWorks(key, map[string]int64{"member1": 1, "member2": 2})
	for cluster, w := range works {
		if diff := cmp.Diff([]string{v1alpha1.WorkFinalizer}, w.Finalizers); diff != "" {
			t.Errorf("finalizers of the Work in %s (-want +got):\n%s", cluster, diff)
		}
		if w.Generation != 1 {
			t.Errorf("Work in %s has generation %d, want 1", cluster, w.Generation)
		}
	}

	b, err := p.env.Flotilla.FlotillaV1alpha1().ResourceBindings(p.namespace).Get(t.Context(), "nginx-deployment", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}, b.Spec.Clusters); diff != "" {
		t.Errorf("spec.clusters (-want +got):\n%s", diff)
	}

	p.apply(strings.Replace(nginx, "replicas: 3", "replicas: 9", 1))
	p.awaitWorks(key, map[string]int64{"member1": 3, "member2": 6})

	// Moving the placement to member3 deletes the Works where it was; they
	// stay, being deleted, until an agent confirms.
	p.apply(onlyOn("member3"))
	p.awaitWorks(key, map[string]int64{"member3": 9}, "member1", "member2")
}

// stopAfter is a Work's fencing setting, 0 without one.
func stopAfter(w *v1alpha1.Work) int32 {
	if w.Spec.Fencing == nil {
		return 0
	}
	return w.Spec.Fencing.StopAfterSeconds
}

// The policy's fencing setting rides on the Works; changing it is a new
// generation, so the agents learn of it.
func TestFencingRidesOnTheWorks(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	withFencing := func(seconds string) string {
		return weighted + "\n  failover: {cluster: {fencing: {stopAfterSeconds: " + seconds + "}}}"
	}
	key := p.bindingKey("nginx", "Deployment")
	p.apply(nginx, withFencing("60"))
	first := p.awaitWork(key, "member1", "fencing 60s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 60 })
	p.awaitWork(key, "member2", "fencing 60s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 60 })

	p.apply(withFencing("120"))
	second := p.awaitWork(key, "member1", "fencing 120s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 120 })
	if second.Generation != first.Generation+1 {
		t.Errorf("generation %d after the fencing change, want %d", second.Generation, first.Generation+1)
	}

	p.apply(weighted)
	third := p.awaitWork(key, "member1", "no fencing", func(w *v1alpha1.Work) bool { return w.Spec.Fencing == nil })
	if third.Generation != second.Generation+1 {
		t.Errorf("generation %d after fencing was dropped, want %d", third.Generation, second.Generation+1)
	}
	if replicasIn(t, third) != 1 {
		t.Errorf("member1 Work has %d replicas, want 1", replicasIn(t, third))
	}
}

// A Work wanted again while it is being deleted cannot be brought back (a
// deletionTimestamp is never cleared): it stays until its deletion is
// confirmed, and then the binding controller creates it anew.
func TestWorkWantedAgainIsCreatedAnew(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	key := p.bindingKey("nginx", "Deployment")
	p.apply(nginx, weighted)
	old := p.awaitWorks(key, map[string]int64{"member1": 1, "member2": 2})["member1"]

	p.apply(onlyOn("member2"))
	p.awaitWorks(key, map[string]int64{"member2": 3}, "member1")
	p.apply(weighted)
	// Back on member1, but its Work is still being deleted.
	p.awaitWorks(key, map[string]int64{"member2": 2}, "member1")

	// The agent confirms: the dispatcher removes the finalizer.
	works := p.env.Flotilla.FlotillaV1alpha1().Works(old.Namespace)
	if _, err := works.Patch(t.Context(), old.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	created := p.awaitWorks(key, map[string]int64{"member1": 1, "member2": 2})["member1"]
	if created.UID == old.UID || created.Generation != 1 {
		t.Errorf("Work in member1 after its deletion: UID %s (old %s), generation %d; want a new Work at generation 1", created.UID, old.UID, created.Generation)
	}
}

const (
	settings = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web}}
data: {color: blue}`
	everywhere = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: settings}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: settings}]
  placement: {clusterAffinity: {clusterNames: [member1, member2]}}`
)

// colorIn reads data.color of a ConfigMap Work's manifest.
func colorIn(t testing.TB, w *v1alpha1.Work) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		t.Fatal(err)
	}
	color, _, _ := unstructured.NestedString(u.Object, "data", "color")
	return color
}

// Kinds without a generation (a ConfigMap) follow their templates too, and
// so do labels, which no kind counts in its generation; a template
// deleted takes its Works with it.
func TestTemplateWithoutGenerationFollowsChanges(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	key := p.bindingKey("settings", "ConfigMap")
	p.apply(settings, everywhere)
	p.awaitWork(key, "member1", "color blue", func(w *v1alpha1.Work) bool { return colorIn(t, w) == "blue" })

	p.apply(strings.Replace(settings, "color: blue", "color: green", 1))
	for _, cluster := range []string{"member1", "member2"} {
		p.awaitWork(key, cluster, "color green", func(w *v1alpha1.Work) bool { return colorIn(t, w) == "green" })
	}
	p.apply(strings.Replace(strings.Replace(settings, "color: blue", "color: green", 1), "app: web", "app: shop", 1))
	p.awaitWork(key, "member2", "label app=shop", func(w *v1alpha1.Work) bool {
		return strings.Contains(string(w.Spec.Workload.Manifests[0].Raw), `"shop"`)
	})

	if err := p.env.Kube.CoreV1().ConfigMaps(p.namespace).Delete(t.Context(), "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.awaitWorks(key, map[string]int64{}, "member1", "member2")
}
