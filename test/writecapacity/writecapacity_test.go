package writecapacity

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/apiwrites"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

var (
	bindingUpdate = apiwrites.Write{Resource: "resourcebindings", Verb: apiwrites.Update}
	bindingStatus = apiwrites.Write{Resource: "resourcebindings", Subresource: "status", Verb: apiwrites.Update}
	workDelete    = apiwrites.Write{Resource: "works", Verb: apiwrites.Delete}
	workStatus    = apiwrites.Write{Resource: "works", Subresource: "status", Verb: apiwrites.Update}
	eventCreate   = apiwrites.Write{Resource: "events", Verb: apiwrites.Create}
	eventPatchW   = apiwrites.Write{Resource: "events", Verb: apiwrites.Patch}
	templateState = apiwrites.Write{Resource: "deployments", Subresource: "status", Verb: apiwrites.Update}
	leaseUpdate   = apiwrites.Write{Resource: "leases", Verb: apiwrites.Update}
	clusterUpdate = apiwrites.Write{Resource: "clusters", Verb: apiwrites.Update}
)

func TestPlanOf(t *testing.T) {
	tests := []struct {
		name        string
		mix         apiwrites.Counts
		wantCounts  apiwrites.Counts
		wantSkipped []apiwrites.Write
	}{
		{
			name:        "proportions kept, unsupported kinds skipped",
			mix:         apiwrites.Counts{bindingUpdate: 300, bindingStatus: 600, workStatus: 100, clusterUpdate: 2},
			wantCounts:  apiwrites.Counts{bindingUpdate: 300, bindingStatus: 600, workStatus: 100},
			wantSkipped: []apiwrites.Write{clusterUpdate},
		},
		{
			name:       "large mixes scaled to one cycle of 1,000",
			mix:        apiwrites.Counts{bindingUpdate: 3000, eventCreate: 7000},
			wantCounts: apiwrites.Counts{bindingUpdate: 300, eventCreate: 700},
		},
		{
			name:       "writes per binding scaled up",
			mix:        apiwrites.Counts{bindingUpdate: 0.25, eventCreate: 0.75},
			wantCounts: apiwrites.Counts{bindingUpdate: 250, eventCreate: 750},
		},
		{
			name:        "nothing to make",
			mix:         apiwrites.Counts{clusterUpdate: 5, bindingStatus: 0},
			wantCounts:  apiwrites.Counts{},
			wantSkipped: []apiwrites.Write{clusterUpdate},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, skipped := planOf(tt.mix)
			got := apiwrites.Counts{}
			for _, w := range plan {
				got[w]++
			}
			if diff := cmp.Diff(tt.wantCounts, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSkipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanInterleaves checks that a cycle does not run one kind after
// another: a measurement cut short still makes the mix.
func TestPlanInterleaves(t *testing.T) {
	plan, _ := planOf(apiwrites.Counts{bindingUpdate: 500, eventCreate: 500})
	for i := 1; i < len(plan); i++ {
		if plan[i] == plan[i-1] {
			t.Fatalf("plan[%d] and plan[%d] are both %v: want the two kinds alternating", i-1, i, plan[i])
		}
	}
}

// TestMeasure makes a failover's mix of writes on a real API server.
func TestMeasure(t *testing.T) {
	env := hubapi.Start(t)
	ns := env.Namespace(t)
	mix := apiwrites.Counts{bindingUpdate: 3, bindingStatus: 6, workDelete: 1, workStatus: 4, eventCreate: 6, eventPatchW: 1,
		templateState: 2, leaseUpdate: 1, clusterUpdate: 1}
	res, err := Measure(t.Context(), env.RESTConfig(), mix, Options{Namespace: ns, Duration: 2 * time.Second, Workers: 4, Pool: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes in %s: %.0f/s, %d conflicts", int(res.Made.Total()), res.Elapsed, res.PerSecond(), res.Conflicts)
	if res.Failed > 0 {
		t.Errorf("%d writes failed, first: %v", res.Failed, res.FirstErr)
	}
	if diff := cmp.Diff([]apiwrites.Write{clusterUpdate}, res.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	for w := range mix {
		if w != clusterUpdate && res.Made[w] == 0 {
			t.Errorf("no %v made: %v", w, res.Made)
		}
	}
	// Every worker takes the plan's next write, so the counts keep the
	// mix's proportions within one write per worker and kind.
	perUnit := res.Made[bindingStatus] / mix[bindingStatus]
	for w, n := range mix {
		if w == clusterUpdate {
			continue
		}
		if want := n * perUnit; res.Made[w] < want-n-4 || res.Made[w] > want+n+4 {
			t.Errorf("%v: %v made, want about %v (the mix's share)", w, res.Made[w], want)
		}
	}
	if res.Elapsed < time.Second || res.Elapsed > 30*time.Second {
		t.Errorf("elapsed %s, want about the 2 s asked for", res.Elapsed)
	}
}
