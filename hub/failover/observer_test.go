package failover

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// heard is what an Observer was told.
type heard struct {
	mu      sync.Mutex
	evicted []string // reason/zone
	ended   []string
	waited  []time.Duration
	// processed are the binding keys whose evictions were written, and
	// the errors ("ok" or the error).
	processed []string
	stateLost []string // reasons
	admitted  []string // zones of the clusters admitted to eviction
}

func (h *heard) observer() Observer {
	return Observer{
		Evicted:        func(reason, zone string) { h.mu.Lock(); h.evicted = append(h.evicted, reason+"/"+zone); h.mu.Unlock() },
		TaskEnded:      func(outcome string) { h.mu.Lock(); h.ended = append(h.ended, outcome); h.mu.Unlock() },
		EvictionWaited: func(_ string, d time.Duration) { h.mu.Lock(); h.waited = append(h.waited, d); h.mu.Unlock() },
		EvictionProcessed: func(key string, _ time.Duration, err error) {
			result := "ok"
			if err != nil {
				result = err.Error()
			}
			h.mu.Lock()
			h.processed = append(h.processed, key+": "+result)
			h.mu.Unlock()
		},
		StateNotPreserved: func(reason string) { h.mu.Lock(); h.stateLost = append(h.stateLost, reason); h.mu.Unlock() },
		ClusterAdmitted:   func(zone string) { h.mu.Lock(); h.admitted = append(h.admitted, zone); h.mu.Unlock() },
	}
}

func (h *heard) snapshot() (evicted, ended []string, waited []time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.evicted), slices.Clone(h.ended), slices.Clone(h.waited)
}

// TestObserverHearsEvictionsAndTheQueue: with a ceiling of one eviction a
// minute per zone, the first binding is evicted at once and the second waits in the
// eviction queue (depth 1) until the fake clock allows it, a minute later;
// the observer hears both evictions with their reason and zone, the wait,
// and the tasks' outcomes.
func TestObserverHearsEvictionsAndTheQueue(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	cfg := testConfig()
	cfg.Zones.BindingRate = 1.0 / 60
	f.cluster("member-1", true)
	f.cluster("member-2", true)
	for _, name := range []string{"a", "b"} {
		f.binding(name, []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, nil)
	}
	var h heard
	f.Start(f.conflicts.Wrap, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		f.ctl = New(clients, informers, f.Events, clk, controllertest.LoggerCountingRetries(f.T, &f.retries), cfg)
		f.ctl.SetObserver(h.observer())
		return f.ctl
	})

	f.setCluster("member-1", true, f.T0.Add(-time.Hour), broken)
	poll(t, "one eviction and one waiting", func() (bool, string) {
		evicted, _, _ := h.snapshot()
		waiting := f.ctl.EvictionsWaiting()
		return len(evicted) == 1 && waiting["default"] == 1, fmt.Sprintf("evicted %v, waiting %v", evicted, waiting)
	})
	if held := f.ctl.HeldEvictions(); len(held) != 1 || held[0].Cluster != "member-1" {
		t.Errorf("held evictions %+v, want one from member-1", held)
	}
	clk.Step(time.Minute)
	poll(t, "the second eviction", func() (bool, string) {
		evicted, _, waited := h.snapshot()
		return len(evicted) == 2 && len(waited) == 1, fmt.Sprintf("evicted %v, waited %v", evicted, waited)
	})
	evicted, _, waited := h.snapshot()
	if diff := cmp.Diff([]string{"TaintUntolerated/default", "TaintUntolerated/default"}, evicted); diff != "" {
		t.Errorf("evictions heard (-want +got):\n%s", diff)
	}
	if waited[0] != time.Minute {
		t.Errorf("the held eviction waited %v, want 1m (the ceiling)", waited[0])
	}
	if n := f.ctl.EvictionsWaiting()["default"]; n != 0 {
		t.Errorf("%d evictions still waiting", n)
	}
	h.mu.Lock()
	processed := slices.Sorted(slices.Values(h.processed))
	h.mu.Unlock()
	if diff := cmp.Diff([]string{f.Namespace + "/a-deployment: ok", f.Namespace + "/b-deployment: ok"}, processed); diff != "" {
		t.Errorf("evictions processed (-want +got):\n%s", diff)
	}

	for _, name := range []string{"a-deployment", "b-deployment"} {
		f.place(name, v1alpha1.TargetCluster{Name: "member-2", Replicas: 3})
	}
	poll(t, "both tasks ended", func() (bool, string) {
		_, ended, _ := h.snapshot()
		return len(ended) == 2, fmt.Sprintf("ended %v", ended)
	})
	if _, ended, _ := h.snapshot(); !cmp.Equal([]string{"GracePeriodExpired", "GracePeriodExpired"}, ended) {
		t.Errorf("task outcomes %v, want GracePeriodExpired twice (grace 0)", ended)
	}
}

func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}
