package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

// recorder keeps the events, as "Type Reason Kind Name: message".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s: %s", eventType, reason, ref.Kind, ref.Name, message))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// conflicts counts the API server's 409 answers to one client, by
// "METHOD spec" or "METHOD status".
type conflicts struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *conflicts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			part := "spec"
			if strings.HasSuffix(req.URL.Path, "/status") {
				part = "status"
			}
			c.mu.Lock()
			c.counts[req.Method+" "+part]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

func (c *conflicts) get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[what]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// awaitEvents waits until the events from index from on are want: the
// controller records them after its writes, which the test may see first.
func (f *fixture) awaitEvents(from int, want ...string) {
	f.t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		got = f.events.list()[from:]
		return len(got) >= len(want), nil
	})
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); err != nil || diff != "" {
		f.t.Errorf("events (-want +got):\n%s", diff)
	}
}

// fixture is the test binary's API server with a namespace for the test's
// bindings, and a scheduling controller on a fake clock.
type fixture struct {
	t         *testing.T
	env       *hubapi.Env
	ns        string
	fl        flotillav1alpha1.FlotillaV1alpha1Interface
	clk       *clocktesting.FakeClock
	events    *recorder
	conflicts *conflicts // the controller's
	retries   atomic.Int64
	stop      func()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // clusters
	f := &fixture{t: t, env: env, ns: env.Namespace(t), fl: env.Flotilla.FlotillaV1alpha1(),
		clk: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)), events: &recorder{}, conflicts: &conflicts{counts: map[string]int{}}}
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
	})
	return f
}

// countingHandler counts the queue's "reconcile failed; retrying" logs:
// writes that went back to the queue.
type countingHandler struct {
	slog.Handler
	retries *atomic.Int64
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reconcile failed; retrying" {
		h.retries.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(attrs), h.retries}
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(name), h.retries}
}

// start runs the controller on informers of its own.
func (f *fixture) start(workers int) {
	f.t.Helper()
	cfg := f.env.RESTConfig()
	cfg.WrapTransport = f.conflicts.wrap
	clients, err := controller.NewClients(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	logger := slog.New(countingHandler{slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}), &f.retries})
	c := New(clients, informers, f.events, f.clk, logger)
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	done := make(chan struct{})
	go func() { c.Run(ctx, workers); close(done) }()
	f.stop = func() { cancel(); <-done; f.stop = nil }
}

// cluster creates a cluster with taints.
func (f *fixture) cluster(name string, taints ...corev1.Taint) {
	f.t.Helper()
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{Taints: taints}}
	if _, err := f.fl.Clusters().Create(f.t.Context(), c, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// taint replaces a cluster's taints.
func (f *fixture) taint(name string, taints ...corev1.Taint) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := f.fl.Clusters().Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Taints = taints
		_, err = f.fl.Clusters().Update(f.t.Context(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// binding creates a ResourceBinding of a Deployment in the test's namespace.
func (f *fixture) binding(name string, replicas int32, placement *v1alpha1.Placement) *v1alpha1.ResourceBinding {
	f.t.Helper()
	b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: f.ns}, Spec: v1alpha1.ResourceBindingSpec{
		Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.ns, Name: name},
		Replicas: replicas, Placement: placement,
	}}
	b, err := f.fl.ResourceBindings(f.ns).Create(f.t.Context(), b, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// editSpec changes a binding's spec, as another controller would.
func (f *fixture) editSpec(name string, edit func(*v1alpha1.ResourceBindingSpec)) *v1alpha1.ResourceBinding {
	f.t.Helper()
	var out *v1alpha1.ResourceBinding
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := f.fl.ResourceBindings(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(&b.Spec)
		out, err = f.fl.ResourceBindings(f.ns).Update(f.t.Context(), b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// await polls the API until cond holds for the binding.
func (f *fixture) await(name, what string, cond func(*v1alpha1.ResourceBinding) bool) *v1alpha1.ResourceBinding {
	f.t.Helper()
	var b *v1alpha1.ResourceBinding
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		b, err = f.fl.ResourceBindings(f.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(b), nil
	})
	if err != nil {
		f.t.Fatalf("waiting for binding %s: %s: %v; last seen spec %+v status %+v", name, what, err, b.Spec, b.Status)
	}
	return b
}

// observed: the scheduler has recorded the binding's generation.
func observed(b *v1alpha1.ResourceBinding) bool {
	return b.Status.SchedulerObservedGeneration == b.Generation
}

func divided(weights map[string]int64) *v1alpha1.Placement {
	p := &v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &v1alpha1.ClusterPreferences{},
	}}
	names := make([]string, 0, len(weights))
	for name := range weights {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{name}}, Weight: weights[name]})
	}
	return p
}
