package work

import (
	"bytes"
	"context"
	"log/slog"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// clusterWait bounds every wait on the member cluster: applies take
// milliseconds and Pods start within seconds, but the machine may be busy.
const clusterWait = 60 * time.Second

// testCluster is a real member cluster and clients for it.
type testCluster struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	rc, err := env.Clusters()[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &testCluster{kube: kube, dyn: dyn}
}

// runningEngine is an engine running on a test cluster, with a feed.
type runningEngine struct {
	*Engine
	feed   *Feed
	cancel context.CancelFunc
	done   chan struct{}
}

// startEngine runs an engine with short retries until stop or the end of
// the test, and waits until it has loaded its records.
func (c *testCluster) startEngine(t *testing.T) *runningEngine {
	t.Helper()
	return c.startEngineWithClock(t, nil)
}

// startEngineWithClock is startEngine with a clock for fencing (nil: the
// real one).
func (c *testCluster) startEngineWithClock(t *testing.T, clk clock.Clock) *runningEngine {
	t.Helper()
	return c.startEngineWith(t, func(cfg *Config) { cfg.Clock = clk })
}

// startEngineWith is startEngine with settings of its own.
func (c *testCluster) startEngineWith(t *testing.T, set func(*Config)) *runningEngine {
	t.Helper()
	cfg := Config{Kube: c.kube, Dynamic: c.dyn, RetryInitial: 200 * time.Millisecond,
		RetryMax: 2 * time.Second, Logger: testLogger(t)}
	set(&cfg)
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &runningEngine{Engine: e, feed: e.Subscribe(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { r.stop(t) })
	select {
	case <-e.Loaded():
	case <-time.After(clusterWait):
		t.Fatal("engine did not load its records")
	}
	return r
}

// stop stops the engine and checks that it left no goroutine behind.
func (r *runningEngine) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(clusterWait):
		t.Fatal("Run did not return")
	}
	r.feed.Close()
	// The informers' loops must have stopped. (A reflector's list runs in a
	// goroutine of its own that client-go does not wait for; it ends once its
	// cancelled request returns, so it is not counted.)
	if left := goroutinesWith("agent/work.(*", "cache.(*sharedIndexInformer).RunWithContext", "cache.(*Reflector).ListAndWatch"); left != "" {
		t.Errorf("goroutines left after Run returned:\n%s", left)
	}
}

// goroutinesWith returns the stacks of the goroutines running any of frames.
func goroutinesWith(frames ...string) string {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		panic(err)
	}
	var found []string
	for stack := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(stack, "goroutinesWith") {
			continue // this goroutine
		}
		if strings.Contains(stack, "(*testCluster).startEngineWith") {
			// The test's own wrapper: Run has returned and closed done, but
			// the goroutine may not have exited yet.
			continue
		}
		for _, frame := range frames {
			if strings.Contains(stack, frame) {
				found = append(found, stack)
				break
			}
		}
	}
	return strings.Join(found, "\n\n")
}

// next returns the first message on the feed that matches, discarding
// others, and fails the test after clusterWait.
func (r *runningEngine) next(t *testing.T, what string, match func(protocol.Message) bool) protocol.Message {
	t.Helper()
	timeout := time.NewTimer(clusterWait)
	defer timeout.Stop()
	for {
		for m, ok := r.feed.Pop(); ok; m, ok = r.feed.Pop() {
			if match(m) {
				return m
			}
		}
		select {
		case <-r.feed.Ready():
		case <-timeout.C:
			t.Fatalf("timed out after %v waiting for %s", clusterWait, what)
		}
	}
}

// applied waits for the WorkApplied of a generation.
func (r *runningEngine) applied(t *testing.T, work string, gen int64) *protocol.WorkApplied {
	t.Helper()
	return r.next(t, "WorkApplied of "+work, func(m protocol.Message) bool {
		a, ok := m.(*protocol.WorkApplied)
		return ok && a.Name == work && a.Generation == gen
	}).(*protocol.WorkApplied)
}

// status waits for a WorkStatus of work that satisfies ok.
func (r *runningEngine) status(t *testing.T, work, what string, ok func(*protocol.WorkStatus) bool) *protocol.WorkStatus {
	t.Helper()
	return r.next(t, what, func(m protocol.Message) bool {
		s, is := m.(*protocol.WorkStatus)
		return is && s.Name == work && ok(s)
	}).(*protocol.WorkStatus)
}

// deleted waits for the WorkDeleted of work.
func (r *runningEngine) deleted(t *testing.T, work string) {
	t.Helper()
	r.next(t, "WorkDeleted of "+work, func(m protocol.Message) bool {
		d, ok := m.(*protocol.WorkDeleted)
		return ok && d.Name == work
	})
}

// get reads an object; nil if it does not exist.
func (c *testCluster) get(t *testing.T, ref objectRef) *unstructured.Unstructured {
	t.Helper()
	r := c.dyn.Resource(ref.gvr())
	var obj *unstructured.Unstructured
	var err error
	if ref.Namespace != "" {
		obj, err = r.Namespace(ref.Namespace).Get(t.Context(), ref.Name, metav1.GetOptions{})
	} else {
		obj, err = r.Get(t.Context(), ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s: %v", ref, err)
	}
	return obj
}

// mustGet reads an object that must exist.
func (c *testCluster) mustGet(t *testing.T, ref objectRef) *unstructured.Unstructured {
	t.Helper()
	obj := c.get(t, ref)
	if obj == nil {
		t.Fatalf("%s does not exist", ref)
	}
	return obj
}

// create makes an object by hand, as an operator would.
func (c *testCluster) create(t *testing.T, ref objectRef, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	created, err := c.dyn.Resource(ref.gvr()).Namespace(ref.Namespace).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", ref, err)
	}
	return created
}

// waitSettled waits until the controllers are done with a hand-made
// Deployment, so that its resourceVersion changes only if someone changes
// it.
func (c *testCluster) waitSettled(t *testing.T, ref objectRef) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, clusterWait, true, func(ctx context.Context) (bool, error) {
		last = c.get(t, ref)
		observed, _, _ := unstructured.NestedInt64(last.Object, "status", "observedGeneration")
		h, _ := health(last)
		return observed == last.GetGeneration() && h == protocol.HealthHealthy, nil
	})
	if err != nil {
		t.Fatalf("%s did not settle: %v; last status: %v", ref, err, last.Object["status"])
	}
	return last
}

// testLogger logs to the test output; debug lines only with -v.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelInfo
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}
