package purge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	flotillainformers "github.com/flotilla-io/flotilla/api/client/informers/externalversions"
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

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fixture is the test binary's API server with a namespace for the test's
// bindings, and the controller on a fake clock.
type fixture struct {
	t      *testing.T
	env    *hubapi.Env
	ns     string
	fl     flotillav1alpha1.FlotillaV1alpha1Interface
	t0     time.Time
	clk    *clocktesting.FakeClock
	events *recorder
	stop   func()
	// failStatus, when set, fails the controller's next status write of a
	// PurgeRequest before it reaches the server.
	failStatus chan struct{}

	mu sync.Mutex
	// wakes are the wake-ups the controller asked for, in order, as
	// name@deadline; changed is closed (and replaced) at each one.
	wakes   []string
	changed chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // purge requests and cluster bindings
	t0 := time.Now().Truncate(time.Second)
	f := &fixture{t: t, env: env, ns: env.Namespace(t), fl: env.Flotilla.FlotillaV1alpha1(), t0: t0, clk: clocktesting.NewFakeClock(t0),
		events: &recorder{}, failStatus: make(chan struct{}, 1), changed: make(chan struct{})}
	t.Cleanup(func() {
		if f.stop != nil {
			f.stop()
		}
	})
	return f
}

// start runs the controller with one worker on informers of its own.
func (f *fixture) start() {
	f.t.Helper()
	cfg := f.env.RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/purgerequests/") && strings.HasSuffix(req.URL.Path, "/status") {
				select {
				case <-f.failStatus:
					if req.Body != nil {
						_, _ = io.Copy(io.Discard, req.Body)
						_ = req.Body.Close()
					}
					return nil, errors.New("injected: connection reset")
				default:
				}
			}
			return rt.RoundTrip(req)
		})
	}
	clients, err := controller.NewClients(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	c := New(clients, informers, f.events, f.clk, slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
		flotillainformers.NewSharedInformerFactory(clients.Flotilla, 0))
	c.waiting = func(name string, at time.Time) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.wakes = append(f.wakes, name+"@"+at.UTC().Format(time.RFC3339))
		close(f.changed)
		f.changed = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	f.stop = func() { cancel(); <-done; f.stop = nil }
}

// task is an eviction task from cluster.
func task(cluster, purgeMode string) v1alpha1.GracefulEvictionTask {
	return v1alpha1.GracefulEvictionTask{FromCluster: cluster, PurgeMode: purgeMode, Reason: "TaintUntolerated", Producer: "TaintManager",
		SuppressDeletion: ptr.To(purgeMode == v1alpha1.PurgeModeNever)}
}

// binding creates the binding of a Deployment (namespace set) or of a
// ClusterRole (namespace empty) with eviction tasks.
func (f *fixture) binding(namespace, name string, tasks ...v1alpha1.GracefulEvictionTask) {
	f.t.Helper()
	spec := v1alpha1.ResourceBindingSpec{Clusters: []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, GracefulEvictionTasks: tasks}
	var err error
	if namespace == "" {
		spec.Resource = v1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}
		_, err = f.fl.ClusterResourceBindings().Create(f.t.Context(), &v1alpha1.ClusterResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-clusterrole"}, Spec: spec}, metav1.CreateOptions{})
	} else {
		spec.Resource = v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: name}
		_, err = f.fl.ResourceBindings(namespace).Create(f.t.Context(), &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: namespace}, Spec: spec}, metav1.CreateOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// tasks reads the eviction tasks of a binding.
func (f *fixture) tasks(namespace, name string) []string {
	f.t.Helper()
	var spec v1alpha1.ResourceBindingSpec
	if namespace == "" {
		b, err := f.fl.ClusterResourceBindings().Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		spec = b.Spec
	} else {
		b, err := f.fl.ResourceBindings(namespace).Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		spec = b.Spec
	}
	return spec.EvictingClusters()
}

// request creates a PurgeRequest.
func (f *fixture) request(name, namespace, binding, cluster string, ttl *int32) {
	f.t.Helper()
	pr := &v1alpha1.PurgeRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PurgeRequestSpec{
		Binding: v1alpha1.BindingReference{Namespace: namespace, Name: binding}, Cluster: cluster, TTLSecondsAfterFinished: ttl}}
	if _, err := f.fl.PurgeRequests().Create(f.t.Context(), pr, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(name string) *v1alpha1.PurgeRequest {
	f.t.Helper()
	pr, err := f.fl.PurgeRequests().Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// answered waits until the request has a result and returns its status.
// Retries wait on the fake clock: if a try fails, the clock is nudged.
func (f *fixture) answered(name string) v1alpha1.PurgeRequestStatus {
	f.t.Helper()
	var pr *v1alpha1.PurgeRequest
	polls := 0
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if polls++; polls%10 == 0 {
			f.clk.Step(time.Millisecond)
		}
		pr = f.get(name)
		return pr != nil && pr.Status.Result != "", nil
	})
	if err != nil {
		f.t.Fatalf("waiting for purge request %s to be answered: %v; last seen %+v", name, err, pr)
	}
	return pr.Status
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

func (f *fixture) wakeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.wakes)
}

// awaitWake waits until the controller, after its first since wake-ups,
// asked to be woken at at for the request name.
func (f *fixture) awaitWake(since int, name string, at time.Time) {
	f.t.Helper()
	key := name + "@" + at.UTC().Format(time.RFC3339)
	timeout := time.After(waitTimeout)
	for {
		f.mu.Lock()
		ok, changed := slices.Contains(f.wakes[since:], key), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			f.t.Fatalf("timed out waiting for the controller to wait for %s; it waits for %q", key, f.wakes)
		}
	}
}

// edit changes a request's spec (and a label, so that even an unchanged
// spec makes a new version the controller looks at).
func (f *fixture) edit(name string, change func(*v1alpha1.PurgeRequest)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr := f.get(name)
		if pr == nil {
			return apierrors.NewNotFound(v1alpha1.Resource("purgerequests"), name)
		}
		if pr.Labels == nil {
			pr.Labels = map[string]string{}
		}
		pr.Labels["edit"] = fmt.Sprint(time.Now().UnixNano())
		change(pr)
		_, err := f.fl.PurgeRequests().Update(f.t.Context(), pr, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatalf("edit purge request %s: %v", name, err)
	}
}

// awaitGone waits until the request is deleted, nudging the fake clock
// now and then: a timer the queue sets just as the test steps the clock
// may start after the step.
func (f *fixture) awaitGone(name string) {
	f.t.Helper()
	polls := 0
	err := wait.PollUntilContextTimeout(f.t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		if polls++; polls%10 == 0 {
			f.clk.Step(time.Millisecond)
		}
		return f.get(name) == nil, nil
	})
	if err != nil {
		f.t.Fatalf("waiting for purge request %s to be deleted: %v", name, err)
	}
}
