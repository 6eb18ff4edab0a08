package eviction

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Producers and reasons of eviction tasks.
const (
	ProducerTaintManager        = "TaintManager"
	ProducerApplicationFailover = "ApplicationFailover"
	ReasonTaintUntolerated      = "TaintUntolerated"
	ReasonApplicationFailure    = "ApplicationFailure"
	// task-end reasons
	ReasonReplacementHealthy = "ReplacementHealthy"
	ReasonGracePeriodExpired = "GracePeriodExpired"
)

// Eviction is one cluster to evict a binding from.
type Eviction struct {
	Cluster, Reason, Message, Producer string
	PurgeMode                          string // policy's value; normalised with v1alpha1.NormalPurgeMode
	GracePeriod                        *int32 // seconds; nil = the hub's default at assessment time
	// State, when the policy preserves state and it could be read: the
	// task records it ([StateFor]).
	State *State
}

// Evict removes e.Cluster from spec.Clusters and appends a graceful eviction
// task: {FromCluster, PurgeMode (normalised), Replicas: &replicas the
// cluster had in spec.Clusters, Reason, Message, Producer,
// CreationTimestamp: now, GracePeriodSeconds: e.GracePeriod,
// SuppressDeletion: &true only for Never, and e.State's labels, clusters
// and time when it has labels}. If spec.Clusters does not hold
// the cluster, nothing changes and it returns false. If a task for the
// cluster already exists, the cluster is still removed from Clusters but no
// second task is added (the existing one keeps its creation time, so a
// repeated eviction does not extend the grace period). Returns true when
// spec changed.
func Evict(spec *v1alpha1.ResourceBindingSpec, e Eviction, now time.Time) bool {
	if spec == nil {
		return false
	}
	kept, replicas, found := without(spec.Clusters, e.Cluster)
	if !found {
		return false
	}
	spec.Clusters = kept
	if slices.ContainsFunc(spec.GracefulEvictionTasks, func(t v1alpha1.GracefulEvictionTask) bool {
		return t.FromCluster == e.Cluster
	}) {
		return true
	}
	// Clip so that append allocates: the old backing array may be shared
	// with a cached copy of the binding.
	spec.GracefulEvictionTasks = append(slices.Clip(spec.GracefulEvictionTasks), newTask(e, replicas, now))
	return true
}

// without returns clusters minus every entry named name, in a new slice
// (removing in place would write into an array a cache may share), and the
// replicas those entries had.
func without(clusters []v1alpha1.TargetCluster, name string) (kept []v1alpha1.TargetCluster, replicas int32, found bool) {
	for _, c := range clusters {
		if c.Name == name {
			replicas += c.Replicas
			found = true
			continue
		}
		kept = append(kept, c)
	}
	return kept, replicas, found
}

func newTask(e Eviction, replicas int32, now time.Time) v1alpha1.GracefulEvictionTask {
	mode := v1alpha1.NormalPurgeMode(e.PurgeMode)
	task := v1alpha1.GracefulEvictionTask{
		FromCluster:       e.Cluster,
		PurgeMode:         mode,
		Replicas:          &replicas,
		Reason:            e.Reason,
		Message:           e.Message,
		Producer:          e.Producer,
		CreationTimestamp: &metav1.Time{Time: now},
	}
	if e.GracePeriod != nil {
		// A copy: the task must not change when the policy's field does.
		grace := *e.GracePeriod
		task.GracePeriodSeconds = &grace
	}
	if mode == v1alpha1.PurgeModeNever {
		suppress := true
		task.SuppressDeletion = &suppress
	}
	if s := e.State; s != nil && s.Labels != nil {
		task.PreservedLabelState = maps.Clone(s.Labels)
		task.ClustersBeforeFailover = slices.Clone(s.ClustersBefore)
		if !s.ObservedAt.IsZero() {
			task.PreservedStateObservedAt = &metav1.Time{Time: s.ObservedAt}
		}
	}
	return task
}
