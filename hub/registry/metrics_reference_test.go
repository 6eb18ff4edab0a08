package registry

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceMetrics: docs/reference/metrics.md lists the families of
// the per-cluster collector as it makes them (make docs rewrites the
// section).
func TestReferenceMetrics(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	// A cluster that renewed, with a taint: every family has a series.
	r := &Registry{clock: clocktesting.NewFakeClock(now), entries: map[string]*entry{
		"member-1": {
			obj:   &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule}}}},
			obs:   health.Observations{LastRenewal: now.Add(-time.Second)},
			state: health.State{Ready: metav1.ConditionUnknown},
		},
	}}
	families, err := docgen.Families(r.Collector())
	if err != nil {
		t.Fatal(err)
	}
	table, err := docgen.MetricTable(families)
	if err != nil {
		t.Fatal(err)
	}
	docgen.Check(t, "docs/reference/metrics.md", "hub-cluster-metrics", table)
}
