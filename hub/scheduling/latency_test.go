package scheduling

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// TestScheduleLatencyObserved: each scheduling attempt is timed on the
// controller's clock, with its result.
func TestScheduleLatencyObserved(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	var mu sync.Mutex
	var results []string
	f.Start(f.conflicts.Wrap, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		c := New(clients, informers, f.Events, f.clk, controllertest.LoggerCountingRetries(f.T, &f.retries))
		c.SetLatencyObserver(func(result string, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if d != 0 {
				t.Errorf("latency %v on a fake clock that did not move", d)
			}
			results = append(results, result)
		})
		return c
	})
	f.binding("nginx", 1, nil)
	f.AwaitBinding("nginx-deployment", "scheduled", placedOn(v1alpha1.TargetCluster{Name: "member-1", Replicas: 1}))
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(results) > 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || results[0] != "scheduled" {
		t.Errorf("results %v (%v), want scheduled first", results, err)
	}
}
