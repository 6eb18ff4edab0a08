package work

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// TestFenceDeadlines checks when the fencing loop asks for a fence: the
// latest contact plus the Work's StopAfterSeconds, never sooner than two
// renew intervals; only Works with objects, not being deleted, not fenced.
func TestFenceDeadlines(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	objects := []objectRef{deployRefOf("a", "b")}
	fencing := func(seconds int32) *workState {
		return &workState{record: &record{Generation: 1, Objects: objects, StopAfterSeconds: seconds}}
	}
	tests := []struct {
		name     string
		works    map[string]*workState
		floor    time.Duration
		at       time.Duration // after the contact
		fenced   []string
		wantNext time.Duration // after the contact; 0: none
	}{
		{name: "before the deadline", works: map[string]*workState{"w": fencing(30)}, at: 29 * time.Second, wantNext: 30 * time.Second},
		{name: "at the deadline", works: map[string]*workState{"w": fencing(30)}, at: 30 * time.Second, fenced: []string{"w"}},
		{name: "earliest of several", works: map[string]*workState{"w": fencing(30), "v": fencing(10)}, at: 10 * time.Second,
			fenced: []string{"v"}, wantNext: 30 * time.Second},
		{name: "floor of two renew intervals", works: map[string]*workState{"w": fencing(1)}, floor: 20 * time.Second,
			at: 19 * time.Second, wantNext: 20 * time.Second},
		{name: "not fencing", works: map[string]*workState{"w": fencing(0)}, at: time.Hour},
		{name: "no objects", works: map[string]*workState{"w": {record: &record{StopAfterSeconds: 5}}}, at: time.Hour},
		{name: "no record", works: map[string]*workState{"w": {desired: &protocol.WorkUpsert{StopAfterSeconds: 5}}}, at: time.Hour},
		{name: "being deleted", works: map[string]*workState{"w": {deleting: true, record: fencing(5).record}}, at: time.Hour},
		{name: "already fenced", works: map[string]*workState{"w": {fence: true, record: fencing(5).record}}, at: time.Hour},
		{name: "the latest upsert's setting counts", works: map[string]*workState{
			"w": {desired: &protocol.WorkUpsert{StopAfterSeconds: 60}, record: fencing(5).record}}, at: 59 * time.Second, wantNext: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newBareEngine(t)
			e.works, e.contact, e.contactFloor = tt.works, t0, tt.floor
			next := e.fenceDue(t0.Add(tt.at))
			var fenced []string
			for name, st := range e.works {
				if st.fence && st.seq > 0 { // asked for now
					fenced = append(fenced, name)
				}
			}
			if diff := cmp.Diff(tt.fenced, fenced); diff != "" {
				t.Errorf("fenced (-want +got):\n%s", diff)
			}
			want := time.Time{}
			if tt.wantNext > 0 {
				want = t0.Add(tt.wantNext)
			}
			if !next.Equal(want) {
				t.Errorf("next deadline %v, want %v", next, want)
			}
		})
	}
}

// newBareEngine is an engine that is not run, on fake clients.
func newBareEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := NewEngine(Config{Kube: fake.NewClientset(), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestContactOnlyMovesForward(t *testing.T) {
	e := newBareEngine(t)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	e.Contact(t0, time.Second)
	e.Contact(t0.Add(-time.Minute), 500*time.Millisecond) // a late ack of an old renewal
	if !e.contact.Equal(t0) || e.contactFloor != time.Second {
		t.Errorf("contact %v, floor %v; want %v and 1s", e.contact, e.contactFloor, t0)
	}
}

// TestFencingWithMemberCluster runs fencing against a real member
// cluster, on a fake clock: cut off for stopAfterSeconds, a Work's
// Deployments go to zero and its CronJob is suspended while a Work without
// fencing is untouched; the failing apply of a fenced Work is not retried;
// a restarted engine keeps the Work fenced (and fences it again); the
// hub's upsert restores it.
func TestFencingWithMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	c := startCluster(t)
	t0 := time.Now()
	clk := clocktesting.NewFakeClock(t0)
	e := c.startEngineWithClock(t, clk)
	e.Contact(t0, 500*time.Millisecond)
	fence := e.FenceSignal()

	solo, plain, free, flaky := deployRefOf("fence", "solo"), deployRefOf("fence", "plain"), deployRefOf("fence", "free"), deployRefOf("fence", "flaky")
	cron := objectRef{Group: "batch", Version: "v1", Kind: "CronJob", Resource: "cronjobs", Namespace: "fence", Name: "nightly"}
	plainManifest := deployment("plain", "fence", "nginx:1.27", 1)
	delete(plainManifest["spec"].(map[string]any), "replicas") // defaults to 1
	soloUpsert := upsert(t, "solo", 1, deployment("solo", "fence", "nginx:1.27", 2), plainManifest, cronJob("nightly", "fence"))
	soloUpsert.StopAfterSeconds = 30
	e.Upsert(soloUpsert)
	e.Upsert(upsert(t, "free", 1, deployment("free", "fence", "nginx:1.27", 1)))
	for pending := map[string]bool{"solo": true, "free": true}; len(pending) > 0; {
		a := e.next(t, "WorkApplied of solo and free", func(m protocol.Message) bool {
			a, ok := m.(*protocol.WorkApplied)
			return ok && pending[a.Name]
		}).(*protocol.WorkApplied)
		if !a.Applied {
			t.Fatalf("%s not applied: %s", a.Name, a.Message)
		}
		delete(pending, a.Name)
	}
	// flaky's apply fails on a kind the cluster does not serve, and is
	// retried every 2 s at most, after its Deployment was applied.
	flakyUpsert := upsert(t, "flaky", 1, deployment("flaky", "fence", "nginx:1.27", 1),
		map[string]any{"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g", "namespace": "fence"}})
	flakyUpsert.StopAfterSeconds = 30
	e.Upsert(flakyUpsert)
	if a := e.applied(t, "flaky", 1); a.Applied {
		t.Fatal("flaky applied, want a failure")
	}
	c.waitFor(t, "solo, plain and free available", func() (bool, string) {
		return readyReplicas(c.mustGet(t, solo)) == 2 && readyReplicas(c.mustGet(t, plain)) == 1 && readyReplicas(c.mustGet(t, free)) == 1, ""
	})

	clk.Step(31 * time.Second)
	c.waitFor(t, "solo's and flaky's workloads stopped", func() (bool, string) {
		objs := []*unstructured.Unstructured{c.mustGet(t, solo), c.mustGet(t, plain), c.mustGet(t, flaky)}
		suspended, _, _ := unstructured.NestedBool(c.mustGet(t, cron).Object, "spec", "suspend")
		state := fmt.Sprintf("replicas %d %d %d, cronjob suspended %v", specReplicas(objs[0]), specReplicas(objs[1]), specReplicas(objs[2]), suspended)
		return specReplicas(objs[0]) == 0 && specReplicas(objs[1]) == 0 && specReplicas(objs[2]) == 0 && suspended, state
	})
	select {
	case <-fence:
	case <-time.After(clusterWait):
		t.Fatal("FenceSignal not closed after a fence")
	}
	for _, ref := range []objectRef{solo, plain} {
		if owner := replicasManager(c.mustGet(t, ref)); owner != FencingFieldManager {
			t.Errorf("%s: spec.replicas managed by %q, want %q", ref, owner, FencingFieldManager)
		}
	}
	rec := c.record(t, "solo")
	if !rec.fenced() || rec.FencedAt.Before(t0.Add(30*time.Second)) || rec.StopAfterSeconds != 30 {
		t.Errorf("record of solo: fenced at %v, stopAfterSeconds %d; want fenced at or after %v, 30", rec.FencedAt, rec.StopAfterSeconds, t0.Add(30*time.Second))
	}
	wantInventory := []protocol.WorkRef{{Name: "free", Generation: 1}, {Name: "solo", Generation: 1, Fenced: true}}
	if diff := cmp.Diff(wantInventory, e.Inventory()); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
	// A Work without fencing is left alone, and the failing apply of a
	// fenced Work is not retried: its Deployment stays at zero.
	freeBefore := c.mustGet(t, free)
	holdFor(t, 3*time.Second, "flaky stays at zero", func() (bool, string) {
		r := specReplicas(c.mustGet(t, flaky))
		return r == 0, fmt.Sprintf("flaky has %d replicas", r)
	})
	if freeAfter := c.mustGet(t, free); specReplicas(freeAfter) != 1 || replicasManager(freeAfter) != FieldManager {
		t.Errorf("free changed during the cut-off: replicas %d managed by %q", specReplicas(freeAfter), replicasManager(freeAfter))
	} else if freeAfter.GetGeneration() != freeBefore.GetGeneration() {
		t.Errorf("free's generation moved from %d to %d", freeBefore.GetGeneration(), freeAfter.GetGeneration())
	}

	// Someone scales solo up while the agent is down; the restarted agent,
	// still cut off, fences it again and reports it fenced.
	e.stop(t)
	scaled := c.mustGet(t, solo)
	if err := unstructured.SetNestedField(scaled.Object, int64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.dyn.Resource(solo.gvr()).Namespace("fence").Update(t.Context(), scaled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted := c.startEngineWithClock(t, clocktesting.NewFakeClock(time.Now()))
	if diff := cmp.Diff(wantInventory, restarted.Inventory()); diff != "" {
		t.Errorf("inventory after the restart (-want +got):\n%s", diff)
	}
	c.waitFor(t, "solo fenced again", func() (bool, string) {
		r, again := specReplicas(c.mustGet(t, solo)), c.record(t, "solo").FencedAt
		return r == 0 && replicasManager(c.mustGet(t, solo)) == FencingFieldManager && !again.Equal(rec.FencedAt),
			fmt.Sprintf("solo has %d replicas, fenced at %v", r, again)
	})

	// The hub sends solo again: restored, and no longer fenced.
	restarted.Contact(time.Now(), 500*time.Millisecond)
	restarted.Upsert(soloUpsert)
	if a := restarted.applied(t, "solo", 1); !a.Applied {
		t.Fatalf("solo not applied again: %s", a.Message)
	}
	c.waitFor(t, "solo restored", func() (bool, string) {
		s, p := c.mustGet(t, solo), c.mustGet(t, plain)
		suspended, _, _ := unstructured.NestedBool(c.mustGet(t, cron).Object, "spec", "suspend")
		return readyReplicas(s) == 2 && readyReplicas(p) == 1 && !suspended,
			fmt.Sprintf("solo %d/%d, plain %d/%d, cronjob suspended %v", readyReplicas(s), specReplicas(s), readyReplicas(p), specReplicas(p), suspended)
	})
	for _, ref := range []objectRef{solo, plain, cron} {
		for _, f := range c.mustGet(t, ref).GetManagedFields() {
			if f.Manager == FencingFieldManager && f.FieldsV1 != nil && string(f.FieldsV1.Raw) != "{}" {
				t.Errorf("%s: the fencing manager still holds %s", ref, f.FieldsV1.Raw)
			}
		}
	}
	if rec := c.record(t, "solo"); rec.fenced() {
		t.Errorf("record of solo still fenced at %v after the restore", rec.FencedAt)
	}
	if diff := cmp.Diff([]protocol.WorkRef{{Name: "free", Generation: 1}, {Name: "solo", Generation: 1}}, restarted.Inventory()); diff != "" {
		t.Errorf("inventory after the restore (-want +got):\n%s", diff)
	}
	for _, w := range []string{"solo", "free", "flaky"} {
		restarted.Delete(w)
		restarted.deleted(t, w)
	}
}

func cronJob(name, namespace string) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "CronJob",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"schedule": "0 3 * * *",
			"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "task", "image": "busybox"}},
			}}}},
		},
	}
}

func specReplicas(obj *unstructured.Unstructured) int64 {
	n, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
	if !found {
		return -1
	}
	return n
}

func readyReplicas(obj *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
	return n
}

// replicasManager is the field manager that owns spec.replicas.
func replicasManager(obj *unstructured.Unstructured) string {
	for _, f := range obj.GetManagedFields() {
		if f.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(f.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		spec, _ := fields["f:spec"].(map[string]any)
		if _, ok := spec["f:replicas"]; ok && strings.HasPrefix(string(f.Operation), "Apply") {
			return f.Manager
		}
	}
	return ""
}

// record reads and parses the record of work.
func (c *testCluster) record(t *testing.T, work string) *record {
	t.Helper()
	cm := c.mustGet(t, cmRefOf(DefaultSystemNamespace, work))
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	r, err := parseRecord(data)
	if err != nil {
		t.Fatalf("record of %s: %v", work, err)
	}
	return r
}

// waitFor polls cond until it holds, failing after clusterWait.
func (c *testCluster) waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, clusterWait, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

// holdFor checks cond at every poll until d has passed: how to see that
// something does not happen.
func holdFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok, seen := cond(); !ok {
			t.Fatalf("%s no longer holds: %s", what, seen)
		}
	}
}
