package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/protocol"
)

// TestDispatchLatencyObserved: a Work changed while the session runs is
// timed from the informer's notification to its write on the agent's
// stream, once per upsert and per deletion.
func TestDispatchLatencyObserved(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	var took []time.Duration
	f := startSessionWith(t, []workSpec{{name: "old", generation: 1}}, []protocol.WorkRef{{Name: "old", Generation: 1}}, func(d *Dispatcher, _ string) {
		d.SetLatencyObserver(func(op string, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			ops, took = append(ops, op), append(took, d)
		})
	})
	// Once this is through, the session is past its resync.
	f.bump(t, "old")
	if got := describeMsg(f.agent.next()); got != "upsert old@2" {
		t.Fatalf("after a new generation: %s", got)
	}
	f.create(t, workSpec{name: "new", generation: 1})
	if got := describeMsg(f.agent.next()); got != "upsert new@1" {
		t.Fatalf("after a new Work: %s", got)
	}
	if err := f.works.Delete(t.Context(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := describeMsg(f.agent.next()); got != "delete old" {
		t.Fatalf("after a deletion: %s", got)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(ops, "delete"), nil
	})
	mu.Lock()
	defer mu.Unlock()
	// old@2 may have gone with the resync (not timed) or after it.
	if err != nil || len(ops) < 2 || !slices.Equal(ops[len(ops)-2:], []string{"upsert", "delete"}) {
		t.Fatalf("latencies observed for %v (%v), want them to end with upsert then delete", ops, err)
	}
	for i, d := range took {
		if d < 0 || d > 10*time.Second {
			t.Errorf("%s latency %v", ops[i], d)
		}
	}
}
