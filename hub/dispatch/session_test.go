package dispatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// pipeStream is one side of an in-memory work stream.
type pipeStream struct {
	io.Reader
	io.Writer
}

func (pipeStream) SetReadDeadline(time.Time) error  { return nil }
func (pipeStream) SetWriteDeadline(time.Time) error { return nil }

// agentEnd is the agent's side: it reads what the hub sends.
type agentEnd struct {
	t      *testing.T
	w      io.Writer
	msgs   chan protocol.Message
	reader *protocol.Reader
}

func (a *agentEnd) send(m protocol.Message) {
	a.t.Helper()
	if err := protocol.WriteMessage(a.w, m); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agentEnd) next() protocol.Message {
	a.t.Helper()
	select {
	case m := <-a.msgs:
		return m
	case <-time.After(10 * time.Second):
		a.t.Fatal("nothing from the hub within 10s")
		return nil
	}
}

// workSpec is a Work a test starts with.
type workSpec struct {
	name       string
	generation int64 // reached by spec updates after the create
	deleting   bool  // deleted after that: it stays, by its finalizer
	stopAfter  int32 // fencing
}

type fixture struct {
	env     *hubapi.Env
	cluster string
	works   flotillav1alpha1.WorkInterface
	agent   *agentEnd
	d       *Dispatcher
	calls   *apiCalls // the dispatcher's requests
}

// apiCalls counts requests about one Work (not the informers' lists and
// watches), by method.
type apiCalls struct {
	mu       sync.Mutex
	byMethod map[string]int
	// held, while set, holds every status write until it is closed.
	held chan struct{}
}

// holdStatusWrites holds the dispatcher's status writes, as a busy API
// server would, until the returned release is called.
func (c *apiCalls) holdStatusWrites() (release func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := make(chan struct{})
	c.held = held
	return sync.OnceFunc(func() {
		c.mu.Lock()
		c.held = nil
		c.mu.Unlock()
		close(held)
	})
}

func (c *apiCalls) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/works/") {
				c.mu.Lock()
				c.byMethod[req.Method]++
				held := c.held
				c.mu.Unlock()
				if held != nil && strings.HasSuffix(req.URL.Path, "/status") {
					select {
					case <-held:
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
			}
			return next.RoundTrip(req)
		})
	})
	return out
}

func (c *apiCalls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byMethod)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// manifest is a ConfigMap whose content tells generations apart.
func manifest(name string, generation int64) v1alpha1.Manifest {
	var m v1alpha1.Manifest
	m.Raw = fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"generation":"%d"}}`, name, generation)
	return m
}

// startSession creates the Works of a new cluster, then starts a
// dispatcher and one session whose agent sends inventory.
func startSession(t *testing.T, works []workSpec, inventory []protocol.WorkRef) *fixture {
	t.Helper()
	return startSessionWith(t, works, inventory, nil)
}

// startSessionWith is startSession with setup run on the dispatcher (and
// the cluster's name) before it starts.
func startSessionWith(t *testing.T, works []workSpec, inventory []protocol.WorkRef, setup func(d *Dispatcher, cluster string)) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	cluster := newCluster(t, env)
	f := &fixture{env: env, cluster: cluster, works: env.Flotilla.FlotillaV1alpha1().Works(v1alpha1.ExecutionNamespace(cluster))}
	for _, ws := range works {
		f.create(t, ws)
	}
	f.calls = &apiCalls{byMethod: map[string]int{}}
	clients, err := kube.NewClients(f.calls.wrap(env.RESTConfig()))
	if err != nil {
		t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := New(clients, informers, controller.DiscardRecorder{}, clock.RealClock{}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if setup != nil {
		setup(d, cluster)
	}
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	hubR, agentW := io.Pipe()
	agentR, hubW := io.Pipe()
	a := &agentEnd{t: t, w: agentW, msgs: make(chan protocol.Message, 64), reader: protocol.NewReader(agentR, protocol.MaxWorkFrameSize)}
	done := make(chan struct{}, 3)
	go func() { d.Run(ctx); done <- struct{}{} }()
	go func() { _ = d.Serve(ctx, cluster, 2, pipeStream{hubR, hubW}); done <- struct{}{} }()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			m, err := a.reader.ReadMessage()
			if err != nil {
				return
			}
			a.msgs <- m
		}
	}()
	t.Cleanup(func() {
		cancel()
		hubR.Close()
		agentR.Close()
		for range 3 {
			<-done
		}
	})
	f.agent, f.d = a, d
	a.send(&protocol.WorkInventory{Works: inventory})
	return f
}

// create makes a Work as the binding controller does (with its finalizer),
// brings it to its generation by spec updates, and deletes it if asked.
func (f *fixture) create(t *testing.T, ws workSpec) {
	t.Helper()
	ctx := t.Context()
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: ws.name, Finalizers: []string{v1alpha1.WorkFinalizer}}}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{manifest(ws.name, 1)}
	if ws.stopAfter > 0 {
		w.Spec.Fencing = &v1alpha1.WorkFencing{StopAfterSeconds: ws.stopAfter}
	}
	w, err := f.works.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for w.Generation < ws.generation {
		w.Spec.Workload.Manifests = []v1alpha1.Manifest{manifest(ws.name, w.Generation+1)}
		if w, err = f.works.Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if w.Generation != ws.generation {
		t.Fatalf("Work %s has generation %d, want %d", ws.name, w.Generation, ws.generation)
	}
	if ws.deleting {
		if err := f.works.Delete(ctx, ws.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) stored(t *testing.T, name string) *v1alpha1.Work {
	t.Helper()
	w, err := f.works.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// update changes the stored Work with change, reading it again when the
// session's own status write got in between.
func (f *fixture) update(t *testing.T, name string, change func(*v1alpha1.Work)) *v1alpha1.Work {
	t.Helper()
	var w *v1alpha1.Work
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w = f.stored(t, name)
		change(w)
		var err error
		w, err = f.works.Update(t.Context(), w, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// bump gives the Work a new generation.
func (f *fixture) bump(t *testing.T, name string) *v1alpha1.Work {
	t.Helper()
	return f.update(t, name, func(w *v1alpha1.Work) {
		w.Spec.Workload.Manifests = []v1alpha1.Manifest{manifest(name, w.Generation+1)}
	})
}

// await polls the API until ok holds for the Work (nil once it is gone).
func (f *fixture) await(t *testing.T, name, what string, ok func(*v1alpha1.Work) bool) {
	t.Helper()
	var last *v1alpha1.Work
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := f.works.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			w = nil
		case err != nil:
			return false, err
		}
		last = w
		return ok(w), nil
	})
	if err != nil {
		t.Fatalf("Work %s: waiting for %s: %v; last seen: %+v", name, what, err, last)
	}
}

func gone(w *v1alpha1.Work) bool { return w == nil }

func describeMsg(m protocol.Message) string {
	switch m := m.(type) {
	case *protocol.WorkUpsert:
		return fmt.Sprintf("upsert %s@%d", m.Name, m.Generation)
	case *protocol.WorkDelete:
		return "delete " + m.Name
	}
	return m.Type().String()
}

// nextMessages reads n messages, sorted by description.
func (a *agentEnd) nextMessages(n int) []string {
	a.t.Helper()
	var got []string
	for range n {
		got = append(got, describeMsg(a.next()))
	}
	sort.Strings(got)
	return got
}

func TestResyncSendsOnlyWhatDiffers(t *testing.T) {
	f := startSession(t,
		[]workSpec{{name: "same", generation: 1}, {name: "older", generation: 2}, {name: "missing", generation: 1}, {name: "tombstone", generation: 1, deleting: true}},
		[]protocol.WorkRef{{Name: "same", Generation: 1}, {Name: "older", Generation: 1}, {Name: "unknown", Generation: 3}, {Name: "tombstone", Generation: 1}})
	want := []string{"delete tombstone", "delete unknown", "upsert missing@1", "upsert older@2"}
	if diff := cmp.Diff(want, f.agent.nextMessages(4)); diff != "" {
		t.Errorf("resync (-want +got):\n%s", diff)
	}

	// The agent confirms the deletion: the finalizer goes, and the Work.
	f.agent.send(&protocol.WorkDeleted{Name: "tombstone"})
	// It applies "older": the Work records the generation.
	f.agent.send(&protocol.WorkApplied{Name: "older", Generation: 2, Applied: true})
	// A change made now reaches the agent.
	f.bump(t, "same")
	if got := describeMsg(f.agent.next()); got != "upsert same@2" {
		t.Fatalf("after the change: %s, want upsert same@2", got)
	}
	f.await(t, "tombstone", "its removal", gone)
	f.await(t, "older", "observed generation 2", func(w *v1alpha1.Work) bool {
		return w != nil && w.Status.ObservedGeneration == 2 && meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WorkConditionApplied)
	})
	// "same" was held at its generation: the inventory acknowledged it.
	f.await(t, "same", "observed generation 1", func(w *v1alpha1.Work) bool { return w != nil && w.Status.ObservedGeneration == 1 })
}

// TestHeldStatusWritesKeepTheStreamRead: while the API server does not
// answer the status writes the agent's reports cause, the hub keeps
// reading the agent's stream (an agent that cannot write drops its
// connection, as healthy agents did during a failover of 1,000 Works),
// and once it answers, every report is stored.
func TestHeldStatusWritesKeepTheStreamRead(t *testing.T) {
	const works = 40
	specs := make([]workSpec, works)
	for i := range specs {
		specs[i] = workSpec{name: fmt.Sprintf("work-%02d", i), generation: 1}
	}
	f := startSession(t, specs, nil)
	f.agent.nextMessages(works) // the upserts of the resync
	release := f.calls.holdStatusWrites()
	t.Cleanup(release)

	// The stream is a pipe: a write returns once the hub has read it.
	sent := make(chan error, 1)
	go func() {
		for _, ws := range specs {
			answer := &protocol.WorkApplied{Name: ws.name, Generation: 1, Applied: true, Message: strings.Repeat("m", 2<<10)}
			if err := protocol.WriteMessage(f.agent.w, answer); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hub stopped reading the agent's answers while their status writes were held")
	}

	release()
	for _, ws := range specs {
		f.await(t, ws.name, "observed generation 1", func(w *v1alpha1.Work) bool { return w != nil && w.Status.ObservedGeneration == 1 })
	}
}

// TestReplacedSessionServedLast: the work stream of a session replaced by
// a newer one, reaching the dispatcher after the newer one's, is not
// served, and the newer session keeps getting the cluster's Works (the
// older one used to take its place, and its end left the cluster with no
// session at all).
func TestReplacedSessionServedLast(t *testing.T) {
	f := startSession(t, []workSpec{{name: "first", generation: 1}}, nil)
	if got := describeMsg(f.agent.next()); got != "upsert first@1" {
		t.Fatalf("resync: %s, want upsert first@1", got)
	}
	hubR, agentW := io.Pipe()
	t.Cleanup(func() { _ = hubR.Close(); _ = agentW.Close() })
	served := make(chan error, 1)
	go func() { served <- f.d.Serve(t.Context(), f.cluster, 1, pipeStream{hubR, io.Discard}) }()
	if err := protocol.WriteMessage(agentW, &protocol.WorkInventory{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("the replaced session's Serve: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the replaced session's work stream is served")
	}
	f.create(t, workSpec{name: "second", generation: 1})
	if got := describeMsg(f.agent.next()); got != "upsert second@1" {
		t.Fatalf("after the replaced session came and went: %s, want upsert second@1", got)
	}
}

// A Work the agent reports fenced is sent again even at the generation the
// agent holds, since only an upsert restores it; fenced Works the hub no
// longer wants are deleted as any other. The Work says it was fenced
// until the agent has applied it again.
func TestResyncRestoresFencedWorks(t *testing.T) {
	f := startSession(t,
		[]workSpec{{name: "fenced", generation: 3, stopAfter: 30}, {name: "same", generation: 1}, {name: "gone", generation: 2, deleting: true}},
		[]protocol.WorkRef{{Name: "fenced", Generation: 3, Fenced: true}, {Name: "same", Generation: 1},
			{Name: "gone", Generation: 2, Fenced: true}, {Name: "unknown", Generation: 1, Fenced: true}})
	var got []string
	for range 3 {
		m := f.agent.next()
		got = append(got, describeMsg(m))
		if u, ok := m.(*protocol.WorkUpsert); ok && u.StopAfterSeconds != 30 {
			t.Errorf("upsert of fenced: stopAfterSeconds %d, want 30", u.StopAfterSeconds)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"delete gone", "delete unknown", "upsert fenced@3"}, got); diff != "" {
		t.Errorf("resync (-want +got):\n%s", diff)
	}

	fencedCondition := func(wantStatus metav1.ConditionStatus, wantReason string) {
		t.Helper()
		f.await(t, "fenced", fmt.Sprintf("condition Fenced=%s (%s)", wantStatus, wantReason), func(w *v1alpha1.Work) bool {
			c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkConditionFenced)
			return c != nil && c.Status == wantStatus && c.Reason == wantReason
		})
	}
	fencedCondition(metav1.ConditionTrue, v1alpha1.ReasonFencedCutOff)
	f.agent.send(&protocol.WorkApplied{Name: "fenced", Generation: 3, Applied: true})
	fencedCondition(metav1.ConditionFalse, v1alpha1.ReasonFencedRestored)
	if c := f.stored(t, "same"); meta.FindStatusCondition(c.Status.Conditions, v1alpha1.WorkConditionFenced) != nil {
		t.Errorf("Work same, not fenced, has a Fenced condition: %+v", c.Status.Conditions)
	}

	// Once in step, a Work at the agent's generation is not sent again: an
	// annotation changes nothing for the agent, so the next message is
	// the upsert of the generation after it.
	f.update(t, "same", func(w *v1alpha1.Work) { w.Annotations = map[string]string{"touched": "yes"} })
	f.bump(t, "same")
	if got := describeMsg(f.agent.next()); got != "upsert same@2" {
		t.Errorf("after an annotation and a spec change: %s, want upsert same@2", got)
	}
}

// A deletion the agent confirms for a Work that is not being deleted (it
// was created anew meanwhile) leaves the Work and its finalizer alone, and
// sends it again: the agent no longer has it.
func TestDeletedConfirmationOfAWorkWantedAgain(t *testing.T) {
	f := startSession(t, []workSpec{{name: "again", generation: 1}}, []protocol.WorkRef{{Name: "again", Generation: 1}})
	f.agent.send(&protocol.WorkDeleted{Name: "again"})
	if got := describeMsg(f.agent.next()); got != "upsert again@1" {
		t.Fatalf("after the agent deleted a wanted Work: %s, want upsert again@1", got)
	}
	if w := f.stored(t, "again"); w.DeletionTimestamp != nil || !slices.Contains(w.Finalizers, v1alpha1.WorkFinalizer) {
		t.Errorf("Work again: deletionTimestamp %v, finalizers %v; want it live with %s", w.DeletionTimestamp, w.Finalizers, v1alpha1.WorkFinalizer)
	}
}

// Deleting a Cluster releases its Works: nobody will come back to confirm
// their deletion, so a Work being deleted goes at once, and so does one
// deleted later (or created and deleted later). Live Works keep their
// finalizer until then.
func TestDeletedClusterReleasesItsWorks(t *testing.T) {
	f := startSession(t, []workSpec{{name: "deleting", generation: 1, deleting: true}, {name: "live", generation: 1}},
		[]protocol.WorkRef{{Name: "live", Generation: 1}})
	if got := describeMsg(f.agent.next()); got != "delete deleting" {
		t.Fatalf("resync: %s, want delete deleting", got)
	}
	f.await(t, "deleting", "a tombstone (the agent did not confirm)", func(w *v1alpha1.Work) bool { return w != nil && w.DeletionTimestamp != nil })

	if err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Delete(t.Context(), f.cluster, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.await(t, "deleting", "its removal", gone)
	if w := f.stored(t, "live"); !slices.Contains(w.Finalizers, v1alpha1.WorkFinalizer) {
		t.Errorf("live Work lost its finalizer: %v", w.Finalizers)
	}

	f.create(t, workSpec{name: "late", generation: 1, deleting: true})
	f.await(t, "late", "its removal", gone)
	if err := f.works.Delete(t.Context(), "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.await(t, "live", "its removal", gone)
}

// The agent's answers to deletions are looked up in the informer: only
// the finalizer's removal reaches the API, however many Works the agent
// listed that never existed and however many deletions it reports that
// the hub never asked for.
func TestDeletedAnswersComeFromTheInformer(t *testing.T) {
	inventory := []protocol.WorkRef{{Name: "tombstone", Generation: 1}}
	for i := range 50 {
		inventory = append(inventory, protocol.WorkRef{Name: fmt.Sprintf("listed-%d", i), Generation: 1})
	}
	f := startSession(t, []workSpec{{name: "tombstone", generation: 1, deleting: true}}, inventory)
	for range inventory {
		if m, ok := f.agent.next().(*protocol.WorkDelete); !ok {
			t.Fatalf("resync sent %s, want only deletions", describeMsg(m))
		}
	}
	for i := range 50 {
		f.agent.send(&protocol.WorkDeleted{Name: fmt.Sprintf("listed-%d", i)})
		f.agent.send(&protocol.WorkDeleted{Name: fmt.Sprintf("never-%d", i)})
	}
	before := f.calls.snapshot()
	f.agent.send(&protocol.WorkDeleted{Name: "tombstone"}) // after the rest: handled last
	f.await(t, "tombstone", "its removal", gone)
	calls := f.calls.snapshot()
	if diff := cmp.Diff(map[string]int{http.MethodPut: 1}, subtract(calls, before)); diff != "" {
		t.Errorf("API calls for the tombstone's confirmation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, calls); before[http.MethodGet] != 0 || before[http.MethodPut] != 0 {
		t.Errorf("API calls before the tombstone's confirmation: %v, want none (diff %s)", before, diff)
	}
	if got := f.d.Limits().UnrequestedDeletes; got != 50 {
		t.Errorf("UnrequestedDeletes = %d, want 50 (the never-listed names)", got)
	}
}

// An agent that says it deleted a Work the hub wants it to hold gets the
// Work again, at the cluster's pace: here two at once, then one an hour.
func TestDeletedReportsOfAHeldWorkArePaced(t *testing.T) {
	f := startSessionWith(t, []workSpec{{name: "again", generation: 1}, {name: "other", generation: 1}},
		[]protocol.WorkRef{{Name: "again", Generation: 1}, {Name: "other", Generation: 1}}, func(d *Dispatcher, cluster string) {
			d.paces[cluster] = statusLimiter{writes: rate.NewLimiter(rate.Every(time.Hour), 2), bytes: rate.NewLimiter(rate.Inf, 0)}
		})
	for i := range 2 {
		f.agent.send(&protocol.WorkDeleted{Name: "again"})
		if got := describeMsg(f.agent.next()); got != "upsert again@1" {
			t.Fatalf("deletion %d of a held Work: %s, want upsert again@1", i+1, got)
		}
	}
	f.agent.send(&protocol.WorkDeleted{Name: "again"}) // beyond the pace: held back
	f.agent.send(&protocol.WorkDeleted{Name: "never"}) // once read, the one before is in the session
	f.bump(t, "other")
	if got := describeMsg(f.agent.next()); got != "upsert other@2" {
		t.Errorf("after a deletion beyond the pace and a new generation of another Work: %s, want upsert other@2", got)
	}
	if got := f.d.Limits().UnrequestedDeletes; got != 4 {
		t.Errorf("UnrequestedDeletes = %d, want 4", got)
	}
	if calls := f.calls.snapshot(); calls[http.MethodGet] != 0 {
		t.Errorf("API calls %v, want no reads", calls)
	}
}

func subtract(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
