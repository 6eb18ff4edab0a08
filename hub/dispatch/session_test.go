package dispatch

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/store"
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

type fixture struct {
	objs  *objects.Objects
	agent *agentEnd
}

func startSession(t *testing.T, works []*v1alpha1.Work, inventory []protocol.WorkRef) *fixture {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects.New(s)
	for _, w := range works {
		if _, err := objs.Works.Create(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	d := New(objs, clock.RealClock{}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	ctx, cancel := context.WithCancel(context.Background())
	hubR, agentW := io.Pipe()
	agentR, hubW := io.Pipe()
	a := &agentEnd{t: t, w: agentW, msgs: make(chan protocol.Message, 64), reader: protocol.NewReader(agentR, protocol.MaxWorkFrameSize)}
	done := make(chan struct{}, 3)
	go func() { d.Run(ctx); done <- struct{}{} }()
	go func() { _ = d.Serve(ctx, "edge-1", pipeStream{hubR, hubW}); done <- struct{}{} }()
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
		s.Close()
	})
	a.send(&protocol.WorkInventory{Works: inventory})
	return &fixture{objs: objs, agent: a}
}

func work(name string, generation int64, deleting bool) *v1alpha1.Work {
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1alpha1.ExecutionNamespace("edge-1"), Generation: generation}}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{{}}
	w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}}`)
	if deleting {
		now := metav1.Now()
		w.DeletionTimestamp = &now
	}
	return w
}

func describeMsg(m protocol.Message) string {
	switch m := m.(type) {
	case *protocol.WorkUpsert:
		return "upsert " + m.Name
	case *protocol.WorkDelete:
		return "delete " + m.Name
	}
	return m.Type().String()
}

func TestResyncSendsOnlyWhatDiffers(t *testing.T) {
	f := startSession(t,
		[]*v1alpha1.Work{work("same", 1, false), work("older", 2, false), work("missing", 1, false), work("tombstone", 1, true)},
		[]protocol.WorkRef{{Name: "same", Generation: 1}, {Name: "older", Generation: 1}, {Name: "unknown", Generation: 3}, {Name: "tombstone", Generation: 1}})
	var got []string
	for range 4 {
		got = append(got, describeMsg(f.agent.next()))
	}
	sort.Strings(got)
	want := []string{"delete tombstone", "delete unknown", "upsert missing", "upsert older"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resync (-want +got):\n%s", diff)
	}

	changes := f.objs.Works.Watch(t.Context(), "", 0)
	// The agent confirms the tombstone: it leaves the store.
	f.agent.send(&protocol.WorkDeleted{Name: "tombstone"})
	// It applies "older": the Work records the generation.
	f.agent.send(&protocol.WorkApplied{Name: "older", Generation: 2, Applied: true})
	// A change made now reaches the agent.
	w, err := f.objs.Works.Get(t.Context(), v1alpha1.ExecutionNamespace("edge-1"), "same")
	if err != nil {
		t.Fatal(err)
	}
	w.Generation = 2
	if _, err := f.objs.Works.Update(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if m, ok := f.agent.next().(*protocol.WorkUpsert); !ok || m.Name != "same" || m.Generation != 2 {
		t.Fatalf("after the change: %v, want upsert of same generation 2", m)
	}
	timeout := time.After(10 * time.Second)
	observed, tombstoneGone := false, false
	for !observed || !tombstoneGone {
		select {
		case ev := <-changes:
			switch {
			case ev.Object.Name == "older":
				observed = ev.Object.Status.ObservedGeneration == 2
			case ev.Object.Name == "tombstone":
				tombstoneGone = ev.Type == store.Deleted
			}
		case <-timeout:
			t.Fatalf("older observed generation 2: %v; tombstone removed: %v", observed, tombstoneGone)
		}
	}
}

// A Work the agent reports fenced is sent again even at the generation the
// agent holds, since only an upsert restores it; fenced Works the hub no
// longer wants are deleted as any other. The Work says it was fenced
// until the agent has applied it again.
func TestResyncRestoresFencedWorks(t *testing.T) {
	fenced := work("fenced", 3, false)
	fenced.Spec.Fencing = &v1alpha1.WorkFencing{StopAfterSeconds: 30}
	f := startSession(t,
		[]*v1alpha1.Work{fenced, work("same", 1, false), work("gone", 2, true)},
		[]protocol.WorkRef{{Name: "fenced", Generation: 3, Fenced: true}, {Name: "same", Generation: 1},
			{Name: "gone", Generation: 2, Fenced: true}, {Name: "unknown", Generation: 1, Fenced: true}})
	changes := f.objs.Works.Watch(t.Context(), "", 0)
	var got []string
	for range 3 {
		m := f.agent.next()
		got = append(got, describeMsg(m))
		if u, ok := m.(*protocol.WorkUpsert); ok && (u.Generation != 3 || u.StopAfterSeconds != 30) {
			t.Errorf("upsert of fenced: generation %d, stopAfterSeconds %d; want 3 and 30", u.Generation, u.StopAfterSeconds)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"delete gone", "delete unknown", "upsert fenced"}, got); diff != "" {
		t.Errorf("resync (-want +got):\n%s", diff)
	}

	fencedCondition := func(wantStatus metav1.ConditionStatus, wantReason string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-changes:
				c := meta.FindStatusCondition(ev.Object.Status.Conditions, v1alpha1.WorkConditionFenced)
				if ev.Object.Name == "fenced" && c != nil && c.Status == wantStatus && c.Reason == wantReason {
					return
				}
			case <-timeout:
				t.Fatalf("Work fenced never had condition Fenced=%s (%s)", wantStatus, wantReason)
			}
		}
	}
	fencedCondition(metav1.ConditionTrue, v1alpha1.ReasonFencedCutOff)
	f.agent.send(&protocol.WorkApplied{Name: "fenced", Generation: 3, Applied: true})
	fencedCondition(metav1.ConditionFalse, v1alpha1.ReasonFencedRestored)
	if c := f.stored(t, "same"); meta.FindStatusCondition(c.Status.Conditions, v1alpha1.WorkConditionFenced) != nil {
		t.Errorf("Work same, not fenced, has a Fenced condition: %+v", c.Status.Conditions)
	}

	// Once in step, a Work at the agent's generation is not sent again.
	w := f.stored(t, "same")
	w.Annotations = map[string]string{"touched": "yes"}
	if _, err := f.objs.Works.Update(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-f.agent.msgs:
		t.Errorf("unexpected %s after the resync", describeMsg(m))
	case <-time.After(300 * time.Millisecond):
	}
}

func (f *fixture) stored(t *testing.T, name string) *v1alpha1.Work {
	t.Helper()
	w, err := f.objs.Works.Get(t.Context(), v1alpha1.ExecutionNamespace("edge-1"), name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
