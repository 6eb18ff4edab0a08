package scheduler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// byRoom is a dynamic or Aggregated scheduling request.
func byRoom(s *v1alpha1.ReplicaSchedulingStrategy, replicas int32, fresh bool, previous []v1alpha1.TargetCluster, clusters []*v1alpha1.Cluster) Input {
	return Input{Placement: &v1alpha1.Placement{ReplicaScheduling: s}, Replicas: replicas, Fresh: fresh, Previous: previous, Clusters: clusters}
}

func TestScheduleDynamicWeight(t *testing.T) {
	dyn := dynamicWeight()
	withoutB := &v1alpha1.Placement{ClusterAffinity: &v1alpha1.ClusterAffinity{Exclude: []string{"b"}}, ReplicaScheduling: dyn}
	runScheduleCases(t, []scheduleCase{
		// Webster over 6:3:3: a, b, c, a, a, then b before c by name.
		{"first schedule splits by room", byRoom(dyn, 6, false, nil, roomy("c", 3, "a", 6, "b", 3)),
			Result{Clusters: targets("a", 3, "b", 2, "c", 1)}},
		{"a cluster without room gets nothing", byRoom(dyn, 4, false, nil, roomy("a", 2, "b", 0, "c", 2)),
			Result{Clusters: targets("a", 2, "c", 2)}},
		// Capacities 4+2, 2+0, 0+2 = 6:2:2: a, b (tie at 2, fewer
		// replicas, then name), c, a, a.
		{"fresh: room plus what a cluster has", byRoom(dyn, 5, true, targets("a", 2, "c", 2), roomy("a", 4, "b", 2, "c", 0)),
			Result{Clusters: targets("a", 3, "b", 1, "c", 1)}},
		{"fresh ignores the previous split", byRoom(dyn, 4, true, targets("a", 4), roomy("a", 0, "b", 4)),
			Result{Clusters: targets("a", 2, "b", 2)}},
		// 5 new over room 1:4:5: c, b, c, b, then a (tie at 1 with c, fewer).
		{"steady scale-up adds the new replicas by free room", byRoom(dyn, 8, false, targets("a", 2, "b", 1), roomy("a", 1, "b", 4, "c", 5)),
			Result{Clusters: targets("a", 3, "b", 3, "c", 2)}},
		{"steady scale-up never takes from a cluster", byRoom(dyn, 5, false, targets("a", 4), roomy("a", 0, "b", 1)),
			Result{Clusters: targets("a", 4, "b", 1)}},
		{"steady scale-down by the current assignment", byRoom(dyn, 4, false, targets("a", 4, "b", 2, "c", 2), roomy("a", 0, "b", 0, "c", 100)),
			Result{Clusters: targets("a", 2, "b", 1, "c", 1)}},
		{"steady scale-down to one", byRoom(dyn, 1, false, targets("a", 1, "b", 3), roomy("a", 9, "b", 0)),
			Result{Clusters: targets("b", 1)}},
		{"no change keeps the previous result whatever the room", byRoom(dyn, 4, false, targets("a", 3, "b", 1), roomy("a", 0, "b", 0, "c", 100)),
			Result{Clusters: targets("a", 3, "b", 1)}},
		{"previous entries with 0 replicas or gone clusters are ignored", byRoom(dyn, 4, false, targets("a", 3, "b", 1, "c", 0), roomy("a", 0, "b", 0, "c", 100)),
			Result{Clusters: targets("a", 3, "b", 1)}},
		// b is excluded now: its 2 replicas are placed anew, on room 2:2.
		{"a filtered-out cluster's replicas are placed anew", Input{Placement: withoutB, Replicas: 5, Previous: targets("a", 3, "b", 2), Clusters: roomy("a", 2, "b", 9, "c", 2)},
			Result{Clusters: targets("a", 4, "c", 1)}},
		// 3 to place again over room 1:5: new, new, then a (tie at 1 with
		// new's 5/5, fewer replicas).
		{"a cluster gone and a new one added", byRoom(dyn, 6, false, targets("a", 3, "gone", 3), roomy("a", 1, "new", 5)),
			Result{Clusters: targets("a", 4, "new", 2)}},
		{"filling every cluster exactly", byRoom(dyn, 7, false, nil, roomy("a", 1, "b", 2, "c", 4)),
			Result{Clusters: targets("a", 1, "b", 2, "c", 4)}},
		{"requirements count", Input{
			Placement: &v1alpha1.Placement{ReplicaScheduling: dyn}, Replicas: 4,
			Requirements: &v1alpha1.ReplicaRequirements{ResourceRequest: resources("cpu", "1")},
			Clusters: []*v1alpha1.Cluster{
				newCluster("a", summary(resources("pods", "100", "cpu", "3"), nil)),
				newCluster("b", summary(resources("pods", "100", "cpu", "10"), resources("cpu", "9"))),
			}}, Result{Clusters: targets("a", 3, "b", 1)}},
		{"replicas 0", byRoom(dyn, 0, false, targets("a", 2), roomy("a", 0, "b", 0)),
			Result{Clusters: targets("a", 0, "b", 0)}},
		{"static weights are ignored with dynamic weight", byRoom(&v1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference: &v1alpha1.ClusterPreferences{DynamicWeight: v1alpha1.DynamicWeightByAvailableReplicas,
				StaticWeightList: []v1alpha1.StaticClusterWeight{weightOf(1, "a")}},
		}, 2, false, nil, roomy("a", 1, "b", 1)), Result{Clusters: targets("a", 1, "b", 1)}},
	})
}

func TestScheduleAggregated(t *testing.T) {
	agg := aggregated()
	runScheduleCases(t, []scheduleCase{
		// b and c hold 9 ≥ 8; 8 over room 5:4 by Webster.
		{"fewest clusters by most room, split by room", byRoom(agg, 8, false, nil, roomy("a", 3, "b", 5, "c", 4)),
			Result{Clusters: targets("b", 4, "c", 4)}},
		{"one cluster when it fits", byRoom(agg, 5, false, nil, roomy("a", 3, "b", 5, "c", 4)),
			Result{Clusters: targets("b", 5)}},
		{"ties by name", byRoom(agg, 4, false, nil, roomy("c", 4, "b", 4, "a", 4)),
			Result{Clusters: targets("a", 4)}},
		// 4 new: b (used, room 3) does not hold them, a (most room) joins;
		// 4 over room 3:10.
		{"scale-up: used clusters first, then most room", byRoom(agg, 6, false, targets("b", 2), roomy("a", 10, "b", 3, "c", 5)),
			Result{Clusters: targets("a", 3, "b", 3)}},
		// Used by room: b 3, c 2 hold the 4 new (a 1 is not needed); 4
		// over 3:2.
		{"scale-up: used clusters by most room", byRoom(agg, 7, false, targets("a", 1, "b", 1, "c", 1), roomy("a", 1, "b", 3, "c", 2, "d", 9)),
			Result{Clusters: targets("a", 1, "b", 3, "c", 3)}},
		{"scale-up: the fewest used clusters", byRoom(agg, 8, false, targets("a", 2, "b", 2), roomy("a", 5, "b", 5, "c", 100)),
			Result{Clusters: targets("a", 6, "b", 2)}},
		// Equal room: more capacity (room plus replicas) first.
		{"scale-up: used clusters with equal room, most replicas first", byRoom(agg, 8, false, targets("a", 1, "b", 3), roomy("a", 4, "b", 4)),
			Result{Clusters: targets("a", 1, "b", 7)}},
		{"scale-up: a used cluster without room is passed over", byRoom(agg, 5, false, targets("a", 2), roomy("a", 0, "b", 5, "c", 6)),
			Result{Clusters: targets("a", 2, "c", 3)}},
		{"scale-down keeps the cluster with the most replicas", byRoom(agg, 3, false, targets("a", 4, "b", 2), roomy("a", 0, "b", 0, "c", 100)),
			Result{Clusters: targets("a", 3)}},
		// a and b hold 9 ≥ 6; 6 over 5:4. c goes.
		{"scale-down onto the fewest clusters, by their replicas", byRoom(agg, 6, false, targets("a", 5, "b", 4, "c", 1), roomy("a", 0, "b", 0, "c", 0)),
			Result{Clusters: targets("a", 3, "b", 3)}},
		{"scale-down ties by name", byRoom(agg, 3, false, targets("c", 2, "b", 2, "a", 2), roomy("a", 0, "b", 0, "c", 0)),
			Result{Clusters: targets("a", 2, "b", 1)}},
		{"no change", byRoom(agg, 10, false, targets("b", 6, "c", 4), roomy("a", 20, "b", 2, "c", 2)),
			Result{Clusters: targets("b", 6, "c", 4)}},
		// Capacities a 20, b 6+2, c 4+2: a alone holds all 10.
		{"fresh after recovery regroups", byRoom(agg, 10, true, targets("b", 6, "c", 4), roomy("a", 20, "b", 2, "c", 2)),
			Result{Clusters: targets("a", 10)}},
		// Capacities a 9, b 7+1: a has the most.
		{"fresh ranks by capacity, not by use", byRoom(agg, 8, true, targets("b", 1), roomy("a", 9, "b", 7)),
			Result{Clusters: targets("a", 8)}},
		{"fresh: equal capacity, a used cluster first", byRoom(agg, 8, true, targets("b", 2), roomy("a", 8, "b", 6)),
			Result{Clusters: targets("b", 8)}},
		// Capacities a 6, b 6, c 3+1: a and b hold 10; 10 over 6:6.
		{"fresh: the pair with the most capacity", byRoom(agg, 10, true, targets("c", 1), roomy("a", 6, "b", 6, "c", 3)),
			Result{Clusters: targets("a", 5, "b", 5)}},
		{"fresh splits the chosen by capacity", byRoom(agg, 9, true, nil, roomy("a", 6, "b", 6, "c", 2)),
			Result{Clusters: targets("a", 5, "b", 4)}},
	})
}

// TestScheduleKarmadaDivision runs the dynamic-weight and Aggregated cases
// of Karmada's pkg/scheduler/core tests (assignment_test.go,
// division_algorithm_test.go): the same rooms, previous results and
// replicas give the same result. Karmada's room is AllocatableReplicas.
func TestScheduleKarmadaDivision(t *testing.T) {
	const m1, m2, m3, m4 = "member1", "member2", "member3", "member4"
	three := func(a, b, c int) []*v1alpha1.Cluster { return roomy(m1, a, m2, b, m3, c) }
	dyn, agg := dynamicWeight(), aggregated()
	tests := []struct {
		name string
		in   Input
		want []v1alpha1.TargetCluster // nil: unschedulable
	}{
		{"dynamic scale-down 12 to 6", byRoom(dyn, 6, false, targets(m1, 2, m2, 4, m3, 6), three(1, 1, 1)),
			targets(m1, 1, m2, 2, m3, 3)},
		{"dynamic scale-up 12 to 24", byRoom(dyn, 24, false, targets(m1, 2, m2, 4, m3, 6), three(10, 10, 10)),
			targets(m1, 6, m2, 8, m3, 10)},
		{"dynamic scale-up 12 to 24 without room", byRoom(dyn, 24, false, targets(m1, 2, m2, 4, m3, 6), three(1, 1, 1)), nil},
		{"dynamic first schedule 6:8:10", byRoom(dyn, 12, false, nil, three(6, 8, 10)), targets(m1, 3, m2, 4, m3, 5)},
		{"dynamic first schedule 8:8:10", byRoom(dyn, 12, false, nil, three(8, 8, 10)), targets(m1, 4, m2, 4, m3, 4)},
		{"dynamic first schedule without room", byRoom(dyn, 12, false, nil, three(3, 3, 3)), nil},
		{"dynamic first schedule 18:12:6", byRoom(dyn, 12, false, nil, three(18, 12, 6)), targets(m1, 6, m2, 4, m3, 2)},
		{"dynamic first schedule 20:12:6", byRoom(dyn, 12, false, nil, three(20, 12, 6)), targets(m1, 6, m2, 4, m3, 2)},
		{"dynamic first schedule 6:12:6", byRoom(dyn, 12, false, nil, three(6, 12, 6)), targets(m1, 3, m2, 6, m3, 3)},
		{"dynamic scale-up with a cluster gone and one new", byRoom(dyn, 12, false, targets(m1, 6, m3, 6), roomy(m1, 3, m2, 3)),
			targets(m1, 9, m2, 3)},
		{"aggregated scale-down 12 to 6", byRoom(agg, 6, false, targets(m1, 4, m2, 8), three(1, 1, 1)), targets(m2, 6)},
		{"aggregated scale-down 12 to 8", byRoom(agg, 8, false, targets(m1, 4, m2, 8), roomy(m1, 100, m2, 100)), targets(m2, 8)},
		{"aggregated scale-up 12 to 24 over 4:6:8", byRoom(agg, 24, false, targets(m1, 4, m2, 8), three(4, 6, 8)),
			targets(m1, 7, m2, 12, m3, 5)},
		{"aggregated scale-up 12 to 24 over 6:6:20", byRoom(agg, 24, false, targets(m1, 4, m2, 8), three(6, 6, 20)),
			targets(m1, 10, m2, 14)},
		{"aggregated scale-up 12 to 24 without room", byRoom(agg, 24, false, targets(m1, 4, m2, 8), three(1, 1, 1)), nil},
		{"aggregated scale-up with a cluster gone and one new", byRoom(agg, 24, false, targets(m1, 4, m2, 8), roomy(m1, 4, m3, 8, m4, 12)),
			targets(m1, 7, m3, 7, m4, 10)},
		{"aggregated first schedule 6:8:10", byRoom(agg, 12, false, nil, three(6, 8, 10)), targets(m2, 5, m3, 7)},
		{"aggregated first schedule 12:8:10", byRoom(agg, 12, false, nil, three(12, 8, 10)), targets(m1, 12)},
		{"aggregated first schedule without room", byRoom(agg, 12, false, nil, three(3, 3, 3)), nil},
		{"aggregated first schedule 6:12:6", byRoom(agg, 12, false, nil, three(6, 12, 6)), targets(m2, 12)},
		{"aggregated first schedule 6:6:6", byRoom(agg, 12, false, nil, three(6, 6, 6)), targets(m1, 6, m2, 6)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Schedule(tt.in)
			if tt.want == nil {
				if !errors.As(err, new(*UnschedulableError)) {
					t.Fatalf("Schedule = %+v, %v; want an UnschedulableError", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			if diff := cmp.Diff(tt.want, got.Clusters); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScheduleTiesByTemplateUID runs Karmada's "brand new assign 5
// replicas" cases (pkg/util/helper/binding_test.go: two clusters of equal
// weight, its odd and even UIDs) through every division that uses
// Webster: Input.TemplateUID decides which cluster gets the odd replica.
func TestScheduleTiesByTemplateUID(t *testing.T) {
	const m1, m2 = "member1", "member2"
	withUID := func(in Input, uid types.UID) Input {
		in.TemplateUID = uid
		return in
	}
	static := Input{Placement: &v1alpha1.Placement{ReplicaScheduling: divided()}, Replicas: 5, Clusters: plainClusters(m2, m1)}
	tests := []struct {
		name string
		in   Input
		// the result with no UID or evenUID; oddUID swaps the clusters
		lower, higher []v1alpha1.TargetCluster
	}{
		{"static, equal weights", static, targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"static, equal weights of 3", withPlacement(static, divided(weightOf(3, m1, m2))), targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"dynamic, first schedule", byRoom(dynamicWeight(), 5, false, nil, roomy(m1, 10, m2, 10)), targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"dynamic, scale-up 2 to 7", byRoom(dynamicWeight(), 7, false, targets(m1, 1, m2, 1), roomy(m1, 4, m2, 4)),
			targets(m1, 4, m2, 3), targets(m1, 3, m2, 4)},
		{"dynamic, scale-down 6 to 5", byRoom(dynamicWeight(), 5, false, targets(m1, 3, m2, 3), roomy(m1, 0, m2, 0)),
			targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"dynamic, fresh", byRoom(dynamicWeight(), 5, true, targets(m1, 2, m2, 4), roomy(m1, 4, m2, 2)),
			targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"aggregated, first schedule", byRoom(aggregated(), 5, false, nil, roomy(m1, 3, m2, 3)), targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		{"aggregated, scale-down 6 to 5", byRoom(aggregated(), 5, false, targets(m1, 3, m2, 3), roomy(m1, 0, m2, 0)),
			targets(m1, 3, m2, 2), targets(m1, 2, m2, 3)},
		// Ties only: a larger weight still gets more.
		{"static 2:1, no tie", withPlacement(static, divided(weightOf(2, m1), weightOf(1, m2))), targets(m1, 3, m2, 2), targets(m1, 3, m2, 2)},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			uid  types.UID
			want []v1alpha1.TargetCluster
		}{{"", tt.lower}, {evenUID, tt.lower}, {oddUID, tt.higher}} {
			t.Run(fmt.Sprintf("%s, UID %q", tt.name, c.uid), func(t *testing.T) {
				got := mustSchedule(t, withUID(tt.in, c.uid))
				if diff := cmp.Diff(c.want, got.Clusters); diff != "" {
					t.Errorf("Schedule (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func withPlacement(in Input, s *v1alpha1.ReplicaSchedulingStrategy) Input {
	in.Placement = &v1alpha1.Placement{ReplicaScheduling: s}
	return in
}

func TestScheduleNoRoom(t *testing.T) {
	three := func(a, b, c int) []*v1alpha1.Cluster { return roomy("member3", c, "member1", a, "member2", b) }
	tests := []struct {
		name string
		in   Input
		want *UnschedulableError
	}{
		{"dynamic, first schedule", byRoom(dynamicWeight(), 10, false, nil, three(3, 1, 0)), &UnschedulableError{
			Reason:  v1alpha1.ReasonUnschedulable,
			Message: "0/3 clusters have room: need 10 replicas, 4 available (member1: 3, member2: 1, member3: 0)",
			Room:    map[string]int64{"member1": 3, "member2": 1, "member3": 0},
		}},
		{"aggregated, steady scale-up", byRoom(aggregated(), 10, false, targets("member1", 4), three(3, 1, 0)), &UnschedulableError{
			Reason:  v1alpha1.ReasonUnschedulable,
			Message: "0/3 clusters have room: need 6 more replicas, 4 available (member1: 3, member2: 1, member3: 0)",
			Room:    map[string]int64{"member1": 3, "member2": 1, "member3": 0},
		}},
		{"fresh counts what clusters have", byRoom(dynamicWeight(), 10, true, targets("member1", 4, "member3", 1), three(3, 1, 0)), &UnschedulableError{
			Reason:  v1alpha1.ReasonUnschedulable,
			Message: "0/3 clusters have room: need 10 replicas, 9 available (member1: 7, member2: 1, member3: 1)",
			Room:    map[string]int64{"member1": 7, "member2": 1, "member3": 1},
		}},
		{"no resource summary", byRoom(aggregated(), 1, false, nil, plainClusters("b", "a")), &UnschedulableError{
			Reason:  v1alpha1.ReasonUnschedulable,
			Message: "0/2 clusters have room: need 1 replicas, 0 available (a: 0, b: 0)",
			Room:    map[string]int64{"a": 0, "b": 0},
		}},
		{"long lists are cut", byRoom(dynamicWeight(), 100, false, nil,
			roomy("c01", 1, "c02", 1, "c03", 1, "c04", 1, "c05", 1, "c06", 1, "c07", 1, "c08", 1, "c09", 1, "c10", 1, "c11", 1, "c12", 1)), &UnschedulableError{
			Reason:  v1alpha1.ReasonUnschedulable,
			Message: "0/12 clusters have room: need 100 replicas, 12 available (c01: 1, c02: 1, c03: 1, c04: 1, c05: 1, c06: 1, c07: 1, c08: 1, c09: 1, c10: 1 and 2 more)",
			Room: map[string]int64{"c01": 1, "c02": 1, "c03": 1, "c04": 1, "c05": 1, "c06": 1,
				"c07": 1, "c08": 1, "c09": 1, "c10": 1, "c11": 1, "c12": 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Schedule(tt.in)
			var ue *UnschedulableError
			if !errors.As(err, &ue) {
				t.Fatalf("Schedule = %+v, %v; want an UnschedulableError", got, err)
			}
			if diff := cmp.Diff(tt.want, ue); diff != "" {
				t.Errorf("UnschedulableError (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApportionCapped(t *testing.T) {
	tests := []struct {
		name    string
		seats   int64
		weights []int64
		caps    []int64
		want    []int64
	}{
		{"no cap reached", 6, []int64{1, 2}, []int64{10, 10}, []int64{2, 4}},
		{"one capped, the rest to the other", 5, []int64{1, 1}, []int64{1, 10}, []int64{1, 4}},
		// Equal weights: 3 each; a capped at 1, then 8 over b and c: 4
		// each, c capped at 2, then b takes the remaining 6.
		{"capping in rounds", 9, []int64{1, 1, 1}, []int64{1, 10, 2}, []int64{1, 6, 2}},
		{"zero cap or weight gets nothing", 3, []int64{0, 5, 5}, []int64{5, 0, 5}, []int64{0, 0, 3}},
		{"caps too small leave seats out", 9, []int64{1, 1}, []int64{2, 3}, []int64{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parties := make([]party, len(tt.weights))
			for i, w := range tt.weights {
				parties[i] = party{name: string(rune('a' + i)), weight: w}
			}
			apportionCapped(tt.seats, parties, tt.caps, lowerNameFirst)
			got := make([]int64, len(parties))
			for i, p := range parties {
				got[i] = p.seats
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("apportionCapped (-want +got):\n%s", diff)
			}
		})
	}
}
