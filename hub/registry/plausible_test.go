package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

func TestImplausible(t *testing.T) {
	tests := []struct {
		name        string
		nodes       int32
		allocatable map[string]string
		allocated   map[string]string
		want        string // in the reason; "" for plausible
	}{
		{"three 8-CPU nodes", 3, map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330"}, map[string]string{"cpu": "18"}, ""},
		{"100,000 CPUs on one node", 1, map[string]string{"cpu": "100000", "pods": "110"}, nil, "allocatable 100k of cpu on 1 nodes"},
		{"100,000 CPUs on 1,000 nodes", 1000, map[string]string{"cpu": "100000"}, nil, ""},
		{"CPUs but no nodes", 0, map[string]string{"cpu": "2000"}, nil, "of cpu on 0 nodes"},
		{"too many nodes", 60_000, nil, nil, "60000 nodes"},
		{"a million GPUs on one node", 1, map[string]string{"nvidia.com/gpu": "2M"}, nil, "nvidia.com/gpu"},
		{"allocated beyond any node", 2, map[string]string{"cpu": "16"}, map[string]string{"memory": "1000Ti"}, "allocated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report := &protocol.ClusterStatus{NodesTotal: tt.nodes, Allocatable: tt.allocatable, Allocated: tt.allocated}
			allocatable, err := resourceList(tt.allocatable)
			if err != nil {
				t.Fatal(err)
			}
			allocated, err := resourceList(tt.allocated)
			if err != nil {
				t.Fatal(err)
			}
			got := implausible(report, allocatable, allocated)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("implausible = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRegistryRefusesImplausibleReports: a 100,000-CPU report leaves the
// cluster without a resource summary (no room for capacity-weighted
// workloads) and says why; a plausible report afterwards is stored again.
func TestRegistryRefusesImplausibleReports(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	report := func(cpu string) {
		t.Helper()
		err := f.reg.Status("edge-1", &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, NodesTotal: 1, NodesReady: 1,
			Allocatable: map[string]string{"cpu": cpu, "pods": "110"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	report("8")
	if c := f.cluster("edge-1"); c.Status.ResourceSummary == nil || meta.FindStatusCondition(c.Status.Conditions, ClusterConditionResourcesPlausible) != nil {
		t.Fatalf("plausible report: summary %v, conditions %v; want a summary and no condition", c.Status.ResourceSummary, c.Status.Conditions)
	}
	report("100000")
	c := f.cluster("edge-1")
	cond := meta.FindStatusCondition(c.Status.Conditions, ClusterConditionResourcesPlausible)
	if c.Status.ResourceSummary != nil || cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "100k of cpu") {
		t.Fatalf("implausible report: summary %v, condition %+v; want no summary and ResourcesPlausible=False naming the CPUs", c.Status.ResourceSummary, cond)
	}
	report("8")
	c = f.cluster("edge-1")
	if cond := meta.FindStatusCondition(c.Status.Conditions, ClusterConditionResourcesPlausible); c.Status.ResourceSummary == nil || cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("plausible again: summary %v, condition %+v; want a summary and ResourcesPlausible=True", c.Status.ResourceSummary, cond)
	}
}

// TestRegistryPacesServedAPIs sends ten changed lists of served APIs at
// once: the first few are stored, the rest wait, and the newest is stored
// with a report after the pace allows it.
func TestRegistryPacesServedAPIs(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	report := func(apis *protocol.ServedAPIs) {
		t.Helper()
		if err := f.reg.Status("edge-1", &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, ServedAPIs: apis}); err != nil {
			t.Fatal(err)
		}
	}
	served := func(i int) *protocol.ServedAPIs {
		return &protocol.ServedAPIs{Items: []protocol.APIEnablement{{GroupVersion: fmt.Sprintf("example.com/v%d", i), Resources: []protocol.APIResource{{Name: "things", Kind: "Thing"}}}}}
	}
	stored := func() string {
		if apis := f.cluster("edge-1").Status.APIEnablements; len(apis) > 0 {
			return apis[0].GroupVersion
		}
		return ""
	}
	changes, last := 0, ""
	for i := 1; i <= 10; i++ {
		report(served(i))
		if got := stored(); got != last {
			changes, last = changes+1, got
		}
	}
	if changes != apisBurst || last != fmt.Sprintf("example.com/v%d", apisBurst) {
		t.Errorf("10 lists at once: %d stored, the last %q; want %d, the last v%d", changes, last, apisBurst, apisBurst)
	}
	clk.Step(apisInterval)
	report(nil)
	if got := stored(); got != "example.com/v10" {
		t.Errorf("after %v: %q stored, want the newest list (v10)", apisInterval, got)
	}
	if n := f.reg.stats.apisCoalesced.Load(); n != 10-apisBurst-1 {
		t.Errorf("%d lists coalesced, want %d", n, 10-apisBurst-1)
	}
}
