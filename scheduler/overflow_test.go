package scheduler

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// hybrid is an on-premises data centre (idc1, idc2: room for 3 each) and
// a public cloud (cloud1, cloud2: room for 10 each).
func hybrid() []*v1alpha1.Cluster {
	return roomy("cloud2", 10, "idc1", 3, "cloud1", 10, "idc2", 3)
}

// overflowGroup is the group idc with the overflow tier cloud, and any
// further tiers given as name, affinity pairs.
func overflowGroup(more ...any) v1alpha1.ClusterAffinityTerm {
	t := v1alpha1.ClusterAffinityTerm{
		AffinityName:       "idc",
		ClusterAffinity:    *names("idc1", "idc2"),
		OverflowAffinities: []v1alpha1.OverflowClusterAffinity{{AffinityName: "cloud", ClusterAffinity: *names("cloud1", "cloud2")}},
	}
	for i := 0; i+1 < len(more); i += 2 {
		t.OverflowAffinities = append(t.OverflowAffinities, v1alpha1.OverflowClusterAffinity{AffinityName: more[i].(string), ClusterAffinity: *more[i+1].(*v1alpha1.ClusterAffinity)})
	}
	return t
}

// overflowing schedules replicas with the groups by dynamic weight on
// the hybrid fleet.
func overflowing(replicas int32, previous []v1alpha1.TargetCluster, groups ...v1alpha1.ClusterAffinityTerm) Input {
	if len(groups) == 0 {
		groups = []v1alpha1.ClusterAffinityTerm{overflowGroup()}
	}
	return Input{
		Placement: &v1alpha1.Placement{ClusterAffinities: groups, ReplicaScheduling: dynamicWeight()},
		Replicas:  replicas, Previous: previous, Clusters: hybrid(), ObservedAffinity: groups[0].AffinityName,
	}
}

func tiers(ts ...Tier) []Tier { return ts }

func TestScheduleOverflow(t *testing.T) {
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	idcCloud := func(idcReplicas, cloudReplicas int64) []Tier {
		return tiers(Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: idcReplicas},
			Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 20, Replicas: cloudReplicas})
	}
	runScheduleCases(t, []scheduleCase{
		{"the primary tier holds them all", overflowing(4, nil),
			Result{Clusters: targets("idc1", 2, "idc2", 2), AffinityName: "idc", Tiers: idcCloud(4, 0)}},
		{"what the primary tier lacks room for overflows", overflowing(10, nil),
			Result{Clusters: targets("cloud1", 2, "cloud2", 2, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: idcCloud(6, 4)}},
		// Karmada's case: idc1 has 3 and room for 2 more; 8 wanted.
		{"replicas a cluster has count in its tier's capacity", with(overflowing(8, targets("idc1", 3)), func(in *Input) {
			in.Clusters = roomy("idc1", 2, "cloud1", 10)
		}), Result{Clusters: targets("cloud1", 3, "idc1", 5), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1"}, Capacity: 5, Replicas: 5},
			Tier{Name: "cloud", Clusters: []string{"cloud1"}, Capacity: 10, Replicas: 3})}},
		{"a scale-down takes from the overflow tier first", with(overflowing(7, targets("cloud1", 2, "cloud2", 2, "idc1", 3, "idc2", 3)), func(in *Input) {
			in.Clusters = roomy("cloud2", 8, "idc1", 0, "cloud1", 8, "idc2", 0)
		}), Result{Clusters: targets("cloud1", 1, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 6},
			Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 20, Replicas: 1})}},
		{"a scale-down below the primary tier's capacity leaves the overflow tier", with(overflowing(4, targets("cloud1", 2, "cloud2", 2, "idc1", 3, "idc2", 3)), func(in *Input) {
			in.Clusters = roomy("cloud2", 8, "idc1", 0, "cloud1", 8, "idc2", 0)
		}), Result{Clusters: targets("idc1", 2, "idc2", 2), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 4},
			Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 20, Replicas: 0})}},
		{"scheduled again, a primary tier with room takes replicas back", overflowing(4, targets("cloud1", 3, "idc1", 1)),
			Result{Clusters: targets("idc1", 3, "idc2", 1), AffinityName: "idc", Tiers: tiers(
				Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 7, Replicas: 4},
				Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 23, Replicas: 0})}},
		{"unchanged and still full, nothing moves", with(overflowing(10, targets("cloud1", 1, "cloud2", 3, "idc1", 3, "idc2", 3)), func(in *Input) {
			in.Clusters = roomy("cloud2", 7, "idc1", 0, "cloud1", 9, "idc2", 0)
		}), Result{Clusters: targets("cloud1", 1, "cloud2", 3, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: idcCloud(6, 4)}},
		{"a cluster the primary and an overflow tier match is in the primary tier",
			overflowing(10, nil, v1alpha1.ClusterAffinityTerm{AffinityName: "idc", ClusterAffinity: *names("idc1", "idc2"),
				OverflowAffinities: []v1alpha1.OverflowClusterAffinity{{AffinityName: "cloud", ClusterAffinity: *names("idc2", "cloud1")}}}),
			Result{Clusters: targets("cloud1", 4, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: tiers(
				Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 6},
				Tier{Name: "cloud", Clusters: []string{"cloud1"}, Capacity: 10, Replicas: 4})}},
		{"a cluster two overflow tiers match is in the first", overflowing(18, nil, overflowGroup("spare", names("cloud2", "idc9"))),
			Result{Clusters: targets("cloud1", 6, "cloud2", 6, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: tiers(
				Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 6},
				Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 20, Replicas: 12},
				Tier{Name: "spare", Clusters: []string{}, Capacity: 0, Replicas: 0})}},
		{"tiers fill in order", with(overflowing(9, nil, overflowGroup("spare", names("spare1"))), func(in *Input) {
			in.Clusters = roomy("cloud1", 2, "idc1", 3, "spare1", 10)
		}), Result{Clusters: targets("cloud1", 2, "idc1", 3, "spare1", 4), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1"}, Capacity: 3, Replicas: 3},
			Tier{Name: "cloud", Clusters: []string{"cloud1"}, Capacity: 2, Replicas: 2},
			Tier{Name: "spare", Clusters: []string{"spare1"}, Capacity: 10, Replicas: 4})}},
		{"an unavailable primary tier: the overflow tier takes all", with(overflowing(4, nil), func(in *Input) {
			for _, c := range in.Clusters {
				if strings.HasPrefix(c.Name, "idc") {
					c.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule}}
				}
			}
		}), Result{Clusters: targets("cloud1", 2, "cloud2", 2), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{}, Capacity: 0, Replicas: 0},
			Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 20, Replicas: 4})}},
		{"Aggregated fills the fewest clusters of each tier", with(overflowing(10, nil), func(in *Input) {
			in.Placement.ReplicaScheduling = aggregated()
		}), Result{Clusters: targets("cloud1", 4, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: idcCloud(6, 4)}},
		{"Fresh divides each tier from scratch", with(overflowing(8, targets("cloud1", 4, "cloud2", 4)), func(in *Input) {
			in.Fresh = true
		}), Result{Clusters: targets("cloud1", 1, "cloud2", 1, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 6},
			Tier{Name: "cloud", Clusters: []string{"cloud1", "cloud2"}, Capacity: 28, Replicas: 2})}},
		{"without replicas only the primary tier counts", overflowing(0, nil),
			Result{Clusters: targets("idc1", 0, "idc2", 0), AffinityName: "idc"}},
		// By label, so that no cluster scores for being listed by name.
		{"a spread keeps the earlier tier's clusters first", with(overflowing(8, nil), func(in *Input) {
			in.Clusters = roomy("cloud2", 10, "idc1", 3, "cloud1", 12, "idc2", 3)
			for _, c := range in.Clusters {
				c.Labels = map[string]string{"site": strings.TrimRight(c.Name, "12")}
			}
			g := &in.Placement.ClusterAffinities[0]
			g.ClusterAffinity = v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "idc"}}}
			g.OverflowAffinities[0].ClusterAffinity = v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "cloud"}}}
			in.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{SpreadByField: v1alpha1.SpreadByFieldCluster, MaxGroups: 3}}
		}), Result{Clusters: targets("cloud1", 2, "idc1", 3, "idc2", 3), AffinityName: "idc", Tiers: tiers(
			Tier{Name: "idc", Clusters: []string{"idc1", "idc2"}, Capacity: 6, Replicas: 6},
			Tier{Name: "cloud", Clusters: []string{"cloud1"}, Capacity: 12, Replicas: 2})}},
	})
}

// TestScheduleOverflowFallsThrough: a group whose tiers together lack
// room is passed over for the next group, as a group without tiers is;
// Explain says why.
func TestScheduleOverflowFallsThrough(t *testing.T) {
	in := overflowing(27, nil, overflowGroup(), v1alpha1.ClusterAffinityTerm{AffinityName: "big", ClusterAffinity: *names("big")})
	in.Clusters = append(in.Clusters, newCluster("big", roomFor(30)))
	in.Explain = true
	want := Result{Clusters: targets("big", 27), AffinityName: "big", Passed: []PassedGroup{{Name: "idc",
		Reason: "0/4 clusters have room: need 27 replicas, 26 available (cloud1: 10, cloud2: 10, idc1: 3, idc2: 3)"}}}
	if diff := cmp.Diff(want, mustSchedule(t, in)); diff != "" {
		t.Errorf("Schedule (-want +got):\n%s", diff)
	}
}

func TestScheduleOverflowUnschedulable(t *testing.T) {
	_, err := Schedule(overflowing(30, nil))
	var ue *UnschedulableError
	if !errors.As(err, &ue) {
		t.Fatalf("Schedule: %v, want an UnschedulableError", err)
	}
	want := &UnschedulableError{
		Reason:  v1alpha1.ReasonUnschedulable,
		Message: "0/4 clusters have room: need 30 replicas, 26 available (cloud1: 10, cloud2: 10, idc1: 3, idc2: 3)",
		Room:    map[string]int64{"cloud1": 10, "cloud2": 10, "idc1": 3, "idc2": 3},
	}
	if diff := cmp.Diff(want, ue); diff != "" {
		t.Errorf("UnschedulableError (-want +got):\n%s", diff)
	}
}

func TestScheduleOverflowNeedsDivisionByRoom(t *testing.T) {
	for name, s := range map[string]*v1alpha1.ReplicaSchedulingStrategy{
		"static weights": divided(weightOf(1, "idc1")),
		"Duplicated":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			in := overflowing(4, nil)
			in.Placement.ReplicaScheduling = s
			_, err := Schedule(in)
			want := "placement.clusterAffinities[0].overflowAffinities: only with replicaScheduling Divided by dynamic weight or Aggregated"
			if err == nil || err.Error() != want || errors.As(err, new(*UnschedulableError)) {
				t.Errorf("Schedule: %v, want the plain error %q", err, want)
			}
		})
	}
}
