package hub

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/failover"
	"github.com/flotilla-io/flotilla/hub/replicas"
	"github.com/flotilla-io/flotilla/internal/docgen"
	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/internal/writelimit"
)

// TestReferenceMetrics: docs/reference/metrics.md lists the hub's metric
// families as its collectors define them (make docs rewrites the
// section), and nothing /metrics serves is left out: the per-cluster
// series are hub/registry's section, the Go runtime's, the process's and
// the work queues' are their libraries' to document.
func TestReferenceMetrics(t *testing.T) {
	// With sessions, the replicas' families are there too. The parts the
	// metrics read are missing: their reads are replaced.
	a := &httpServer{sessions: &replicas.Gossip{}}
	var documented []prometheus.Collector
	for _, m := range a.funcMetrics() {
		m.read = func() float64 { return 0 }
		documented = append(documented, m.collector())
	}
	documented = append(documented, zoneCollector{oneZone{}}, karmadaQueueCollector{oneZone{}}, connCollector{oneListener})
	documented = append(documented, newHubMetrics(writelimit.New(1)).instruments()...)
	families, err := docgen.Families(documented...)
	if err != nil {
		t.Fatal(err)
	}
	table, err := docgen.MetricTable(families)
	if err != nil {
		t.Fatal(err)
	}
	docgen.Check(t, "docs/reference/metrics.md", "hub-metrics", table)

	known := map[string]bool{}
	for _, d := range docgen.Descs(append(documented, a.registry.Collector(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))...) {
		known[d] = true
	}
	for _, d := range docgen.Descs(a.collectors()...) {
		if !known[d] {
			t.Errorf("/metrics serves %s, which docs/reference/metrics.md leaves out: add its collector to TestReferenceMetrics and run `make docs`", d)
		}
	}
}

// oneListener is one listener's connection counts.
func oneListener() map[string]netlimit.Stats { return map[string]netlimit.Stats{"http": {}} }

// oneZone is a failover controller with one zone, in mode Normal, and an
// eviction waiting there.
type oneZone struct{}

func (oneZone) EvictionsWaiting() map[string]int { return map[string]int{"zone-a": 1} }
func (oneZone) ClustersWaiting() map[string]int  { return map[string]int{"zone-a": 1} }

func (oneZone) EvictionsDeferred() int { return 1 }

func (oneZone) HeldEvictions() []failover.HeldEviction {
	return []failover.HeldEviction{{Binding: "web/nginx-deployment", Cluster: "member-1"}}
}

func (oneZone) Stats() failover.Stats {
	return failover.Stats{ZoneModes: map[string]string{"zone-a": string(eviction.ModeNormal)}}
}
