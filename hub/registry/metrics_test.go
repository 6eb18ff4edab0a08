package registry

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/internal/promcheck"
)

// scrape gathers g as /metrics serves it, failing on anything promtool's
// linter or the conventions reject.
func scrape(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	families, problems, err := promcheck.Gather(g)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the exposition breaks conventions:\n%s", strings.Join(problems, "\n"))
	}
	return families
}

// TestClusterMetricsFollowTheRegistry: the per-cluster series come from
// the registry's memory at each scrape: the lease age grows while the
// agent is silent, Ready and the taints follow the health decisions, and
// the detection delay is observed once, when the lease expires.
func TestClusterMetricsFollowTheRegistry(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	reg := prometheus.NewRegistry()
	detectionDelay := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "flotilla_cluster_detection_delay_seconds", Help: "Detection delay."})
	f.reg.SetDetectionObserver(func(d time.Duration) { detectionDelay.Observe(d.Seconds()) })
	reg.MustRegister(detectionDelay, f.reg.Collector())
	f.connect("edge-1")
	f.renew("edge-1")
	edge := map[string]string{"cluster": "edge-1"}
	withLabels := func(kv ...string) map[string]string {
		out := map[string]string{"cluster": "edge-1"}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	got := scrape(t, reg)
	if v := promcheck.Value(got, "flotilla_cluster_lease_age_seconds", edge); v != 0 {
		t.Errorf("lease age right after a renewal = %v, want 0", v)
	}
	if v := promcheck.Value(got, "flotilla_cluster_ready", withLabels("status", "True")); v != 1 {
		t.Errorf("ready{True} = %v, want 1", v)
	}

	f.advance(12 * time.Second)
	got = scrape(t, reg)
	if v := promcheck.Value(got, "flotilla_cluster_lease_age_seconds", edge); v != 12 {
		t.Errorf("lease age 12 s after the renewal = %v, want 12", v)
	}

	// The grace period (40 s) ends at t0+40 s; the hub notices at t0+45 s.
	f.clock.Step(33 * time.Second)
	f.reg.fireDue()
	got = scrape(t, reg)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"flotilla_cluster_lease_age_seconds", edge, 45},
		{"flotilla_cluster_ready", withLabels("status", "Unknown"), 1},
		{"flotilla_cluster_ready", withLabels("status", "True"), 0},
		{"flotilla_cluster_taint", withLabels("key", "cluster.flotilla.io/unreachable", "effect", "NoSchedule"), 1},
		{"flotilla_cluster_detection_delay_seconds", nil, 1},
	} {
		if v := promcheck.Value(got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if sum := got["flotilla_cluster_detection_delay_seconds"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 5 {
		t.Errorf("detection delay = %v s, want 5 (Unknown at 45 s, grace 40 s)", sum)
	}

	f.clock.Step(time.Second)
	f.renew("edge-1")
	got = scrape(t, reg)
	if v := promcheck.Value(got, "flotilla_cluster_ready", withLabels("status", "True")); v != 1 {
		t.Errorf("ready{True} after the agent came back = %v, want 1", v)
	}
	if v := promcheck.Value(got, "flotilla_cluster_taint", edge); !math.IsNaN(v) {
		t.Errorf("a taint series is left after the agent came back")
	}
	if v := promcheck.Value(got, "flotilla_cluster_detection_delay_seconds", nil); v != 1 {
		t.Errorf("detection delays observed = %v, want still 1", v)
	}
}

// BenchmarkClusterCollector10k: a scrape of 10,000 clusters' series.
func BenchmarkClusterCollector10k(b *testing.B) {
	r := &Registry{entries: map[string]*entry{}, clock: clocktesting.NewFakeClock(t0)}
	for i := range 10000 {
		name := fmt.Sprintf("edge-%05d", i)
		r.entries[name] = &entry{obj: &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}},
			obs: health.Observations{LastRenewal: t0}, state: health.State{Ready: metav1.ConditionTrue}}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
