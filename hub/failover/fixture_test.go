package failover

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

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

// count is how many events start with prefix.
func (r *recorder) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
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

// fixture is the test binary's API server with a namespace for the test's
// bindings, and a failover controller.
type fixture struct {
	t         *testing.T
	env       *hubapi.Env
	ns        string
	fl        flotillav1alpha1.FlotillaV1alpha1Interface
	t0        time.Time
	events    *recorder
	conflicts *conflicts // the controller's
	retries   atomic.Int64
	ctl       *Controller
	stop      func()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // clusters
	f := &fixture{t: t, env: env, ns: env.Namespace(t), fl: env.Flotilla.FlotillaV1alpha1(), t0: time.Now().Truncate(time.Second),
		events: &recorder{}, conflicts: &conflicts{counts: map[string]int{}}}
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
	})
	return f
}

// testConfig ends tasks as soon as a replacement is scheduled and evicts
// without a rate limit to speak of.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.GracefulEvictionTimeout = 0
	cfg.Zones.Rate = 1e6
	return cfg
}

// start runs the controller on informers of its own.
func (f *fixture) start(clk clock.WithTicker, cfg Config, workers int) {
	f.t.Helper()
	rc := f.env.RESTConfig()
	rc.WrapTransport = f.conflicts.wrap
	clients, err := controller.NewClients(rc)
	if err != nil {
		f.t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	logger := slog.New(countingHandler{slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}), &f.retries})
	f.ctl = New(clients, informers, f.events, clk, logger, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	done := make(chan struct{})
	go func() { f.ctl.Run(ctx, workers); close(done) }()
	f.stop = func() { cancel(); <-done; f.stop = nil }
}

// cluster creates a cluster, Ready (since an hour before t0) or not.
func (f *fixture) cluster(name string, ready bool, taints ...corev1.Taint) {
	f.t.Helper()
	ctx := f.t.Context()
	c, err := f.fl.Clusters().Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{Taints: taints}}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	c.Status.Conditions = []metav1.Condition{readyCondition(ready, f.t0.Add(-time.Hour))}
	if _, err := f.fl.Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func readyCondition(ready bool, since time.Time) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: "ClusterReady", LastTransitionTime: metav1.NewTime(since)}
	if !ready {
		cond.Status, cond.Reason = metav1.ConditionFalse, "ClusterNotReady"
	}
	return cond
}

// setCluster changes a cluster's taints and Ready condition.
func (f *fixture) setCluster(name string, ready bool, since time.Time, taints ...corev1.Taint) {
	f.t.Helper()
	ctx, clusters := f.t.Context(), f.fl.Clusters()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Taints = taints
		if c, err = clusters.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.Status.Conditions = []metav1.Condition{readyCondition(ready, since)}
		_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// broken is a taint no placement tolerates: evicts at once.
var broken = corev1.Taint{Key: "example.com/broken", Effect: corev1.TaintEffectNoExecute}

// binding creates a ResourceBinding of a Deployment with 3 replicas placed
// on clusters, as scheduled.
func (f *fixture) binding(name string, clusters []v1alpha1.TargetCluster, failover *v1alpha1.FailoverBehavior) *v1alpha1.ResourceBinding {
	f.t.Helper()
	b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: f.ns}, Spec: v1alpha1.ResourceBindingSpec{
		Resource: v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.ns, Name: name},
		Replicas: 3, Clusters: clusters, Failover: failover,
	}}
	b, err := f.fl.ResourceBindings(f.ns).Create(f.t.Context(), b, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return f.scheduled(b)
}

// scheduled writes the scheduler's status for the binding's generation.
func (f *fixture) scheduled(b *v1alpha1.ResourceBinding) *v1alpha1.ResourceBinding {
	f.t.Helper()
	b.Status.SchedulerObservedGeneration = b.Generation
	b.Status.LastScheduledTime = &metav1.Time{Time: f.t0.Add(-time.Hour)}
	b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(f.t0)}}
	b, err := f.fl.ResourceBindings(f.ns).UpdateStatus(f.t.Context(), b, metav1.UpdateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// place does the scheduler's work: the placement, then its status.
func (f *fixture) place(name string, clusters ...v1alpha1.TargetCluster) {
	f.t.Helper()
	ctx, bindings := f.t.Context(), f.fl.ResourceBindings(f.ns)
	var b *v1alpha1.ResourceBinding
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if b, err = bindings.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		b.Spec.Clusters = clusters
		b, err = bindings.Update(ctx, b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if b, err = bindings.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		b.Status.SchedulerObservedGeneration = b.Generation
		b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScheduled,
			ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(f.t0)}}
		_, err = bindings.UpdateStatus(ctx, b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
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

// awaitEvents waits until the events from index from on are want: the
// controller records them after its writes, which the test may see first.
func (f *fixture) awaitEvents(from int, want ...string) {
	f.t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		got = f.events.list()[from:]
		return len(got) >= len(want), nil
	})
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		f.t.Errorf("events (-want +got):\n%s", diff)
	}
}

// evictedFrom: the binding has a task from cluster and is no longer
// placed there.
func evictedFrom(cluster string) func(*v1alpha1.ResourceBinding) bool {
	return func(b *v1alpha1.ResourceBinding) bool {
		return slices.Contains(b.Spec.EvictingClusters(), cluster) &&
			!slices.ContainsFunc(b.Spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster })
	}
}

func noTasks(b *v1alpha1.ResourceBinding) bool { return len(b.Spec.GracefulEvictionTasks) == 0 }
