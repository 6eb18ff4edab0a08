package eviction

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// placed is a spec with the clusters given as name, replicas, name, replicas...
func placed(kv ...any) v1alpha1.ResourceBindingSpec {
	var spec v1alpha1.ResourceBindingSpec
	for i := 0; i+1 < len(kv); i += 2 {
		spec.Clusters = append(spec.Clusters, v1alpha1.TargetCluster{Name: kv[i].(string), Replicas: int32(kv[i+1].(int))})
	}
	return spec
}

func withTasks(spec v1alpha1.ResourceBindingSpec, tasks ...v1alpha1.GracefulEvictionTask) v1alpha1.ResourceBindingSpec {
	spec.GracefulEvictionTasks = tasks
	return spec
}

func TestEvict(t *testing.T) {
	now := at(time.Hour)
	byTaint := func(cluster, mode string) Eviction {
		return Eviction{Cluster: cluster, Reason: ReasonTaintUntolerated, Message: "taint cluster.flotilla.io/unreachable:NoExecute", Producer: ProducerTaintManager, PurgeMode: mode}
	}
	// task is the task byTaint(cluster, mode) makes, without grace period.
	task := func(cluster, mode string, replicas int32) v1alpha1.GracefulEvictionTask {
		return v1alpha1.GracefulEvictionTask{
			FromCluster: cluster, PurgeMode: mode, Replicas: ptr.To(replicas),
			Reason: ReasonTaintUntolerated, Message: "taint cluster.flotilla.io/unreachable:NoExecute", Producer: ProducerTaintManager,
			CreationTimestamp: &metav1.Time{Time: now},
		}
	}
	older := v1alpha1.GracefulEvictionTask{FromCluster: "b", PurgeMode: v1alpha1.PurgeModeGracefully, Reason: ReasonApplicationFailure,
		Producer: ProducerApplicationFailover, CreationTimestamp: &metav1.Time{Time: t0}}
	never := task("b", v1alpha1.PurgeModeNever, 3)
	never.SuppressDeletion = ptr.To(true)
	tests := []struct {
		name        string
		spec        v1alpha1.ResourceBindingSpec
		eviction    Eviction
		want        v1alpha1.ResourceBindingSpec
		wantChanged bool
	}{
		{"removes the cluster and appends a task with every field", placed("a", 2, "b", 3, "c", 1),
			Eviction{Cluster: "b", Reason: ReasonApplicationFailure, Message: "unhealthy for 5m", Producer: ProducerApplicationFailover,
				PurgeMode: v1alpha1.PurgeModeGracefully, GracePeriod: ptr.To[int32](600)},
			withTasks(placed("a", 2, "c", 1), v1alpha1.GracefulEvictionTask{
				FromCluster: "b", PurgeMode: v1alpha1.PurgeModeGracefully, Replicas: ptr.To[int32](3),
				Reason: ReasonApplicationFailure, Message: "unhealthy for 5m", Producer: ProducerApplicationFailover,
				GracePeriodSeconds: ptr.To[int32](600), CreationTimestamp: &metav1.Time{Time: now},
			}), true},
		{"last cluster", placed("b", 3), byTaint("b", ""),
			withTasks(placed(), task("b", v1alpha1.PurgeModeGracefully, 3)), true},
		{"no replicas", placed("a", 0, "b", 0), byTaint("b", v1alpha1.PurgeModeGracefully),
			withTasks(placed("a", 0), task("b", v1alpha1.PurgeModeGracefully, 0)), true},
		{"empty purge mode is Gracefully", placed("a", 2, "b", 3), byTaint("b", ""),
			withTasks(placed("a", 2), task("b", v1alpha1.PurgeModeGracefully, 3)), true},
		{"Graciously is Gracefully", placed("a", 2, "b", 3), byTaint("b", v1alpha1.PurgeModeGraciously),
			withTasks(placed("a", 2), task("b", v1alpha1.PurgeModeGracefully, 3)), true},
		{"Immediately is Directly", placed("a", 2, "b", 3), byTaint("b", v1alpha1.PurgeModeImmediately),
			withTasks(placed("a", 2), task("b", v1alpha1.PurgeModeDirectly, 3)), true},
		{"Directly does not suppress deletion", placed("a", 2, "b", 3), byTaint("b", v1alpha1.PurgeModeDirectly),
			withTasks(placed("a", 2), task("b", v1alpha1.PurgeModeDirectly, 3)), true},
		{"Never suppresses deletion", placed("a", 2, "b", 3), byTaint("b", v1alpha1.PurgeModeNever),
			withTasks(placed("a", 2), never), true},
		{"appends after tasks of other clusters", withTasks(placed("a", 2, "c", 3), older), byTaint("c", ""),
			withTasks(placed("a", 2), older, task("c", v1alpha1.PurgeModeGracefully, 3)), true},
		{"not placed: no change", withTasks(placed("a", 2), older), byTaint("c", ""),
			withTasks(placed("a", 2), older), false},
		{"nothing placed: no change", placed(), byTaint("c", ""), placed(), false},
		{"existing task: removed from clusters, not duplicated", withTasks(placed("a", 2, "b", 3), older), byTaint("b", v1alpha1.PurgeModeNever),
			withTasks(placed("a", 2), older), true},
		{"existing task, not placed: no change", withTasks(placed("a", 2), older), byTaint("b", ""),
			withTasks(placed("a", 2), older), false},
		{"preserved state is recorded", placed("b", 3), withState(byTaint("b", v1alpha1.PurgeModeDirectly)),
			withTasks(placed(), stateTask(task("b", v1alpha1.PurgeModeDirectly, 3))), true},
		{"a state without labels is not", placed("b", 3), func() Eviction { e := byTaint("b", ""); e.State = &State{ObservedAt: t0}; return e }(),
			withTasks(placed(), task("b", v1alpha1.PurgeModeGracefully, 3)), true},
		{"a cluster listed twice goes with all its replicas", placed("a", 2, "b", 3, "b", 1), byTaint("b", ""),
			withTasks(placed("a", 2), task("b", v1alpha1.PurgeModeGracefully, 4)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			changed := Evict(&spec, tt.eviction, now)
			if changed != tt.wantChanged {
				t.Errorf("Evict = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.want, spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func withState(e Eviction) Eviction {
	e.State = &State{Labels: map[string]string{"rev": "web-7"}, ClustersBefore: []string{"b"}, ObservedAt: t0}
	return e
}

func stateTask(task v1alpha1.GracefulEvictionTask) v1alpha1.GracefulEvictionTask {
	task.PreservedLabelState = map[string]string{"rev": "web-7"}
	task.ClustersBeforeFailover = []string{"b"}
	task.PreservedStateObservedAt = &metav1.Time{Time: t0}
	return task
}

func TestEvictNilSpec(t *testing.T) {
	if Evict(nil, Eviction{Cluster: "a"}, t0) {
		t.Error("Evict(nil) = true")
	}
}

// TestEvictDoesNotAlias checks that Evict writes nothing a shallow copy of
// the spec (as a cache hands out) can see, and keeps no pointer of its input.
func TestEvictDoesNotAlias(t *testing.T) {
	tasks := make([]v1alpha1.GracefulEvictionTask, 1, 4)
	tasks[0] = v1alpha1.GracefulEvictionTask{FromCluster: "x"}
	cached := withTasks(placed("a", 1, "b", 2, "c", 3), tasks...)
	cached.GracefulEvictionTasks = tasks[:1]
	spec := cached
	grace := ptr.To[int32](60)
	if !Evict(&spec, Eviction{Cluster: "a", GracePeriod: grace}, t0) {
		t.Fatal("Evict = false")
	}
	if diff := cmp.Diff(withTasks(placed("a", 1, "b", 2, "c", 3), v1alpha1.GracefulEvictionTask{FromCluster: "x"}), cached); diff != "" {
		t.Errorf("cached copy changed (-want +got):\n%s", diff)
	}
	if extra := tasks[:2][1]; extra.FromCluster != "" {
		t.Errorf("spare capacity of the cached tasks written: %v", extra)
	}
	*grace = 1
	if got := *spec.GracefulEvictionTasks[1].GracePeriodSeconds; got != 60 {
		t.Errorf("task's grace period follows the eviction's pointer: %d", got)
	}
}
