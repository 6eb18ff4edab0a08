package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestReportConditions: APIServerHealthy and NodesReady follow the
// agent's reports; a change of status is written at the next flush (with
// Ready), a new node count only at the report pace, and a report that
// changes nothing, or only the agent's message, writes nothing.
func TestReportConditions(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	f.renew("edge-1")
	f.flush()
	type cond struct{ Status, Reason, Message string }
	long := strings.Repeat("é", 300)
	tests := []struct {
		name         string
		report       protocol.ClusterStatus
		wantAPI      cond
		wantNodes    *cond
		dirty, paced bool // written at the next flush; at the report pace
	}{
		{"healthy, every node Ready", protocol.ClusterStatus{APIServerHealthy: true, NodesTotal: 3, NodesReady: 3},
			cond{"True", "APIServerHealthy", "the agent reports its API server healthy"}, &cond{"True", "AllNodesReady", "3 of 3 nodes Ready"}, true, true},
		{"the same again", protocol.ClusterStatus{APIServerHealthy: true, NodesTotal: 3, NodesReady: 3},
			cond{"True", "APIServerHealthy", "the agent reports its API server healthy"}, &cond{"True", "AllNodesReady", "3 of 3 nodes Ready"}, false, false},
		{"a node not Ready", protocol.ClusterStatus{APIServerHealthy: true, NodesTotal: 3, NodesReady: 2},
			cond{"True", "APIServerHealthy", "the agent reports its API server healthy"}, &cond{"False", "NodesNotReady", "2 of 3 nodes Ready"}, true, true},
		{"another node not Ready: the count at the report pace", protocol.ClusterStatus{APIServerHealthy: true, NodesTotal: 3, NodesReady: 1},
			cond{"True", "APIServerHealthy", "the agent reports its API server healthy"}, &cond{"False", "NodesNotReady", "1 of 3 nodes Ready"}, false, true},
		{"API server unhealthy: the agent's message, bounded", protocol.ClusterStatus{APIServerHealthy: false, HealthMessage: long, NodesTotal: 3, NodesReady: 1},
			cond{"False", "APIServerUnhealthy", "the agent reports its API server unhealthy: " + strings.Repeat("é", 128) + "…"}, &cond{"False", "NodesNotReady", "1 of 3 nodes Ready"}, true, false},
		{"another message only: nothing to write", protocol.ClusterStatus{APIServerHealthy: false, HealthMessage: "readyz: refused", NodesTotal: 3, NodesReady: 1},
			cond{"False", "APIServerUnhealthy", "the agent reports its API server unhealthy: " + strings.Repeat("é", 128) + "…"}, &cond{"False", "NodesNotReady", "1 of 3 nodes Ready"}, false, false},
		{"no nodes counted: NodesReady as it was", protocol.ClusterStatus{APIServerHealthy: true},
			cond{"True", "APIServerHealthy", "the agent reports its API server healthy"}, &cond{"False", "NodesNotReady", "1 of 3 nodes Ready"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Step(time.Second)
			tt.report.ObservedAt = clk.Now()
			if err := f.reg.Status("edge-1", &tt.report); err != nil {
				t.Fatal(err)
			}
			f.reg.mu.Lock()
			dirty, paced := f.reg.dirty["edge-1"], f.reg.reportDirty["edge-1"]
			f.reg.mu.Unlock()
			if dirty != tt.dirty || paced != tt.paced {
				t.Errorf("written at the next flush %v, at the report pace %v; want %v, %v", dirty, paced, tt.dirty, tt.paced)
			}
			c := f.cluster("edge-1")
			got := map[string]cond{}
			for _, c := range c.Status.Conditions {
				got[c.Type] = cond{string(c.Status), c.Reason, c.Message}
			}
			if diff := cmp.Diff(tt.wantAPI, got[v1alpha1.ClusterConditionAPIServerHealthy]); diff != "" {
				t.Errorf("APIServerHealthy (-want +got):\n%s", diff)
			}
			if nodes, ok := got[v1alpha1.ClusterConditionNodesReady]; tt.wantNodes != nil && (!ok || nodes != *tt.wantNodes) {
				t.Errorf("NodesReady = %+v, want %+v", nodes, *tt.wantNodes)
			}
			if ready := got[v1alpha1.ClusterConditionReady]; ready.Status != string(metav1.ConditionTrue) {
				t.Errorf("Ready = %+v: the thresholds are Ready's, not these conditions'", ready)
			}
			f.flush()
		})
	}
}
