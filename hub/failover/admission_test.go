package failover

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestClusterAdmission: with one failed cluster a minute per zone, the
// first failed cluster is admitted at once and every binding leaves it;
// the second waits its turn, across a restart of the controller too (the
// admission is recorded on the Cluster and the zone's bucket counts from
// it), and goes a minute later. A cluster that recovers loses its record.
func TestClusterAdmission(t *testing.T) {
	f := newFixture(t)
	clk := clocktesting.NewFakeClock(f.T0)
	cfg := testConfig()
	cfg.Zones.ClusterRate = 1.0 / 60
	for _, name := range []string{"member-1", "member-2", "member-3"} {
		f.cluster(name, true)
	}
	bindings := []string{"a-deployment", "b-deployment"}
	for _, name := range []string{"a", "b"} {
		f.binding(name, []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, nil)
	}
	f.start(clk, cfg, 2)

	f.setCluster("member-1", true, f.T0.Add(-time.Hour), broken)
	for _, name := range bindings {
		f.AwaitBinding(name, "evicted from member-1", evictedFrom("member-1"))
	}
	f.awaitAdmissionRecord("member-1", f.T0.UTC().Format(time.RFC3339Nano))

	f.setCluster("member-2", true, f.T0.Add(-time.Hour), broken)
	poll(t, "member-2 waiting for admission, with both its bindings", func() (bool, string) {
		clusters, bindings := f.ctl.ClustersWaiting(), f.ctl.EvictionsWaiting()
		return clusters["default"] == 1 && bindings["default"] == 2, fmt.Sprintf("clusters waiting %v, evictions waiting %v", clusters, bindings)
	})

	// A restart: member-1 stays admitted, member-2 keeps waiting, as the
	// zone admitted a cluster at t0.
	f.Stop()
	f.start(clk, cfg, 2)
	poll(t, "member-2 waiting after the restart", func() (bool, string) {
		clusters, bindings := f.ctl.ClustersWaiting(), f.ctl.EvictionsWaiting()
		return clusters["default"] == 1 && bindings["default"] == 2, fmt.Sprintf("clusters waiting %v, evictions waiting %v", clusters, bindings)
	})
	for _, name := range bindings {
		if spec, _ := f.BindingSpec(f.Namespace, name); !slices.ContainsFunc(spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == "member-2" }) {
			t.Errorf("%s left member-2 before its turn: %v", name, spec.Clusters)
		}
	}

	clk.Step(time.Minute)
	for _, name := range bindings {
		f.AwaitBinding(name, "evicted from member-2", evictedFrom("member-2"))
	}
	f.awaitAdmissionRecord("member-2", f.T0.Add(time.Minute).UTC().Format(time.RFC3339Nano))
	if got := f.Events.Count("Normal EvictionAdmitted"); got != 2 {
		t.Errorf("%d EvictionAdmitted events, want 2 (one per cluster, none again on the restart): %v", got, f.Events.List())
	}
	f.heard.mu.Lock()
	admitted := slices.Clone(f.heard.admitted)
	f.heard.mu.Unlock()
	if !slices.Equal(admitted, []string{"default", "default"}) {
		t.Errorf("admissions heard %v, want two in default", admitted)
	}

	f.setCluster("member-1", true, f.T0.Add(-time.Hour))
	f.awaitAdmissionRecord("member-1", "")
}

// awaitAdmissionRecord waits until a cluster's admission record is want
// ("": none).
func (f *fixture) awaitAdmissionRecord(cluster, want string) {
	f.T.Helper()
	poll(f.T, "admission record of "+cluster+" "+want, func() (bool, string) {
		cl, err := f.Flotilla.Clusters().Get(f.T.Context(), cluster, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := cl.Annotations[v1alpha1.AnnotationEvictionAdmitted]
		return got == want, "record " + got
	})
}
