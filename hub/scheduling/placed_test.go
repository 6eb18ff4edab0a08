package scheduling

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
)

// TestPlacedCountsRoomOnce: a binding created with the placement Place
// gave it is scheduled from the clusters Place was given, not from that
// placement. The replicas Place put on a cluster are not in its reported
// room yet; counted as replicas it has on top of that room, they were
// counted twice, and an overflow tier with room for 3 took 6 (the
// overflow e2e test placed 6:1 instead of 3:4). With the fleet as Place
// saw it, the scheduler records the placement without writing the spec;
// when the room changed between Place and the schedule, it writes the
// placement it would have written without Place.
func TestPlacedCountsRoomOnce(t *testing.T) {
	tests := []struct {
		name string
		// allocated is member-1's allocated CPU once Place placed the
		// binding (18 of 24 before: room for 3 replicas of 2 CPU).
		allocated      string
		want           []v1alpha1.TargetCluster
		wantGeneration int64
		wantMessage    string
	}{
		{"the fleet as Place saw it", "18", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 3}, {Name: "member-2", Replicas: 4}}, 1,
			"placed on {member-2:4, member-1:3}; idc full, overflow to cloud: 4"},
		{"room freed meanwhile", "14", []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 5}, {Name: "member-2", Replicas: 2}}, 2,
			"placed on {member-1:5, member-2:2}; idc full, overflow to cloud: 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.roomyCluster("member-1", "18")
			f.roomyCluster("member-2", "0")
			ctl := f.start(1)
			spec := overflowSpec(7)
			placed := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 3}, {Name: "member-2", Replicas: 4}}
			spec.Clusters = f.awaitPlace(ctl, "placed-deployment", overflowSpec(7), placed)

			if tt.allocated != "18" {
				f.setAllocated("member-1", tt.allocated)
				f.awaitPlace(ctl, "probe", overflowSpec(7), tt.want) // the scheduler's fleet has the change
			}
			f.CreateDeploymentBinding("placed", spec)
			b := f.AwaitBinding("placed-deployment", "scheduled", func(b *v1alpha1.ResourceBinding) bool {
				return observed(b) && b.Generation == tt.wantGeneration
			})
			if diff := cmp.Diff(tt.want, b.Spec.Clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if lst := b.Status.LastScheduledTime; lst == nil || !lst.Time.Equal(f.clk.Now()) {
				t.Errorf("lastScheduledTime %v, want the clock's %v", lst, f.clk.Now())
			}
			f.AwaitEvents(0, "Normal Scheduled ResourceBinding placed-deployment: "+tt.wantMessage)
		})
	}
}

// overflowSpec is a binding of replicas of 2 CPU that fills member-1
// (the group idc) and overflows to member-2 (the tier cloud), by room.
func overflowSpec(replicas int32) v1alpha1.ResourceBindingSpec {
	return v1alpha1.ResourceBindingSpec{
		Replicas:            replicas,
		ReplicaRequirements: &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		Placement: &v1alpha1.Placement{
			ClusterAffinities: []v1alpha1.ClusterAffinityTerm{{
				AffinityName:       "idc",
				ClusterAffinity:    v1alpha1.ClusterAffinity{ClusterNames: []string{"member-1"}},
				OverflowAffinities: []v1alpha1.OverflowClusterAffinity{{AffinityName: "cloud", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"member-2"}}}},
			}},
			ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &v1alpha1.ClusterPreferences{DynamicWeight: v1alpha1.DynamicWeightByAvailableReplicas},
			},
		},
	}
}

// awaitPlace asks ctl to place the binding NAME of the test's namespace,
// created with spec, until it gives want, or none when want is nil (the
// scheduler's view of the fleet lags the API), and returns it.
func (f *fixture) awaitPlace(ctl *Controller, name string, spec v1alpha1.ResourceBindingSpec, want []v1alpha1.TargetCluster) []v1alpha1.TargetCluster {
	f.T.Helper()
	var got []v1alpha1.TargetCluster
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		clusters, ok := ctl.Place(controller.Key(f.Namespace, name), 1, &spec, &v1alpha1.ResourceBindingStatus{})
		got = clusters
		return ok == (want != nil) && cmp.Equal(want, clusters), nil
	})
	if err != nil {
		f.T.Fatalf("Place: %v (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	return got
}

// roomyCluster creates a cluster of 24 CPU and 110 pods with allocated
// CPU allocated.
func (f *fixture) roomyCluster(name, allocated string) {
	f.T.Helper()
	f.CreateCluster(name)
	f.setAllocated(name, allocated)
}

// setAllocated sets a cluster's resource summary: 24 CPU and 110 pods
// allocatable, allocated CPU allocated.
func (f *fixture) setAllocated(name, allocated string) {
	f.T.Helper()
	clusters := f.Flotilla.Clusters()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(f.T.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.ResourceSummary = &v1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("24"), corev1.ResourcePods: resource.MustParse("110")},
			Allocated:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocated)},
		}
		_, err = clusters.UpdateStatus(f.T.Context(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// TestPlacedThenTainted: once the schedule of a placement Place gave is
// recorded, later schedules start from spec.clusters as any other, so a
// cluster tainted NoSchedule since keeps the replicas it has (the
// StatefulSet failover e2e test saw its binding moved at the taint, before
// any eviction).
func TestPlacedThenTainted(t *testing.T) {
	f := newFixture(t)
	f.CreateCluster("member-1")
	f.CreateCluster("member-2")
	ctl := f.start(1)
	on := func(cluster string) v1alpha1.ResourceBindingSpec {
		return v1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &v1alpha1.Placement{
			ClusterAffinity:   &v1alpha1.ClusterAffinity{ClusterNames: []string{cluster}},
			ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDuplicated},
		}}
	}
	want := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}}
	spec := on("member-1")
	spec.Clusters = f.awaitPlace(ctl, "placed-deployment", on("member-1"), want)
	f.CreateDeploymentBinding("placed", spec)
	f.AwaitBinding("placed-deployment", "recorded", observed)

	f.SetTaints("member-1", corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
	f.awaitPlace(ctl, "probe", on("member-1"), nil) // the scheduler's fleet has the taint
	f.CreateDeploymentBinding("later", on("member-2"))
	f.AwaitBinding("later-deployment", "scheduled", observed) // one worker: after the tainted cluster's schedules

	b := f.AwaitBinding("placed-deployment", "recorded", observed)
	if diff := cmp.Diff(want, b.Spec.Clusters); diff != "" {
		t.Errorf("clusters after the taint (-want +got):\n%s", diff)
	}
	f.AwaitEvents(0, "Normal Scheduled ResourceBinding placed-deployment: placed on {member-1:1}",
		"Normal Scheduled ResourceBinding later-deployment: placed on {member-2:1}")
}
