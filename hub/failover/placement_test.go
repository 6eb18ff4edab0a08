package failover

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// TestEvictionCarriesReplacement: with the scheduler's placement, an
// eviction is one write of the binding with the replacement placed; with
// no placement to be had, the cluster is only removed.
func TestEvictionCarriesReplacement(t *testing.T) {
	tests := []struct {
		name   string
		placed []v1alpha1.TargetCluster // the placer's answer; nil: none
		want   []v1alpha1.TargetCluster
	}{
		{"placed", []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}},
		{"nowhere to go", nil, []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			clk := clocktesting.NewFakeClock(f.T0)
			f.cluster("member-1", true)
			f.cluster("member-2", true)
			f.binding("nginx", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, nil)
			asked := make(chan v1alpha1.ResourceBindingSpec, 10)
			f.placer = func(key string, generation int64, spec *v1alpha1.ResourceBindingSpec, _ *v1alpha1.ResourceBindingStatus) ([]v1alpha1.TargetCluster, bool) {
				if key != f.Namespace+"/nginx-deployment" || generation != 2 {
					t.Errorf("placer asked about %s, generation %d: want %s/nginx-deployment, 2 (the eviction's)", key, generation, f.Namespace)
				}
				asked <- *spec.DeepCopy()
				return tt.placed, tt.placed != nil
			}
			f.start(clk, testConfig(), 1)

			f.setCluster("member-1", true, f.T0.Add(-time.Hour), broken)
			b := f.AwaitBinding("nginx-deployment", "evicted from member-1", evictedFrom("member-1"))
			if diff := cmp.Diff(tt.want, b.Spec.Clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if b.Generation != 2 {
				t.Errorf("generation %d, want 2: the eviction and its replacement in one write", b.Generation)
			}
			spec := <-asked
			if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 2}}, spec.Clusters); diff != "" {
				t.Errorf("the placer was asked about clusters (-want +got):\n%s", diff)
			}
			if got := spec.EvictingClusters(); !cmp.Equal(got, []string{"member-1"}) {
				t.Errorf("the placer was asked with evicting clusters %v, want [member-1]", got)
			}
		})
	}
}
