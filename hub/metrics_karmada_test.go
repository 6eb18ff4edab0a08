package hub

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-io/flotilla/hub/failover"
)

// heldList is a failover controller holding back the evictions listed.
type heldList []failover.HeldEviction

func (h heldList) HeldEvictions() []failover.HeldEviction { return h }

// TestKarmadaEvictionQueueMetrics: the held evictions are counted per
// Karmada queue (both always present) and per member cluster and binding
// kind, and written evictions are counted by result, under Karmada's
// names and labels.
func TestKarmadaEvictionQueueMetrics(t *testing.T) {
	held := heldList{
		{Binding: "web/a-deployment", Cluster: "member-1"},
		{Binding: "web/b-deployment", Cluster: "member-1"},
		{Binding: "web/b-deployment", Cluster: "member-2"},
	}
	want := `
# HELP eviction_kind_total Karmada's name: evictions due but held back by their zone's rate, by member cluster and binding kind (ResourceBinding, ClusterResourceBinding).
# TYPE eviction_kind_total gauge
eviction_kind_total{member_cluster="member-1",resource_kind="ResourceBinding"} 2
eviction_kind_total{member_cluster="member-2",resource_kind="ResourceBinding"} 1
# HELP eviction_queue_depth Karmada's name: evictions due but held back by their zone's rate, by eviction queue (binding-eviction, cluster-binding-eviction); flotilla_eviction_queue_depth has them per zone.
# TYPE eviction_queue_depth gauge
eviction_queue_depth{name="binding-eviction"} 3
eviction_queue_depth{name="cluster-binding-eviction"} 0
`
	if err := testutil.CollectAndCompare(karmadaQueueCollector{held}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	k := newKarmadaEvictionInstruments()
	k.observe("web/a-deployment", 3*time.Millisecond, nil)
	k.observe("clusterrole-admin", time.Millisecond, nil)
	k.observe("clusterrole-admin", time.Millisecond, errors.New("conflict"))
	for _, tt := range []struct {
		queue, result string
		want          float64
	}{
		{"binding-eviction", "success", 1},
		{"cluster-binding-eviction", "success", 1},
		{"cluster-binding-eviction", "error", 1},
		{"binding-eviction", "error", 0},
	} {
		if got := testutil.ToFloat64(k.total.WithLabelValues(tt.queue, tt.result)); got != tt.want {
			t.Errorf("eviction_processing_total{name=%q,result=%q} = %v, want %v", tt.queue, tt.result, got, tt.want)
		}
	}
	if n := testutil.CollectAndCount(k.latency, "eviction_processing_latency_seconds"); n != 2 {
		t.Errorf("%d latency series, want 2 (one per queue)", n)
	}
}
