package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// statefulYAML: a StatefulSet of one replica on one of member-1 and
// member-2, with Karmada's policy as written: purgeMode Directly, and its
// updateRevision kept across a failover as the label
// example.com/revision.
const statefulYAML = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: stateful}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: busybox:db}]}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: db, namespace: stateful}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: StatefulSet, name: db}]
  placement:
    clusterAffinity: {clusterNames: [member-1, member-2]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
    spreadConstraints: [{spreadByField: cluster, minGroups: 1, maxGroups: 1}]
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules: [{aliasLabelName: example.com/revision, jsonPath: "{ .updateRevision }"}]
`

// twiceWatch polls two member API servers every 100 ms for a StatefulSet
// and remembers every poll that found it in both.
type twiceWatch struct {
	mu    sync.Mutex
	polls int
	both  []string
	stop  func()
}

func (f *fleet) watchNeverTwice(namespace, name string, clusters ...string) *twiceWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &twiceWatch{}
	var wg sync.WaitGroup
	w.stop = func() { cancel(); wg.Wait() }
	f.t.Cleanup(w.stop)
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var in []string
			for _, c := range clusters {
				_, err := f.clients[c].AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
				if err == nil || !apierrors.IsNotFound(err) && ctx.Err() == nil {
					in = append(in, c) // an error other than NotFound counts as there
				}
			}
			w.mu.Lock()
			if ctx.Err() == nil {
				w.polls++
				if len(in) > 1 {
					w.both = append(w.both, time.Now().Format("15:04:05.000"))
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return w
}

// TestStatefulFailoverDirectly: the StatefulSet's cluster loses its agent;
// the binding is evicted with purgeMode Directly, its updateRevision kept
// in the eviction task, and the new copy waits until the old one is gone
// (the hub says so); when the agent returns and deletes it, the copy in
// the other cluster is made with the preserved label. Polled every 100 ms,
// the StatefulSet is never in both member clusters.
func TestStatefulFailoverDirectly(t *testing.T) {
	f := startFleet(t, 2, failoverFlags...)
	f.apply("stateful.yaml", statefulYAML)
	var first, second, revision string
	waitFor(t, 60*time.Second, "db running in one cluster with its revision reported", func() (bool, string) {
		for _, c := range []string{"member-1", "member-2"} {
			s, err := f.clients[c].AppsV1().StatefulSets("stateful").Get(t.Context(), "db", metav1.GetOptions{})
			if err != nil || s.Status.UpdateRevision == "" || s.Status.ReadyReplicas != 1 {
				continue
			}
			first, revision = c, s.Status.UpdateRevision
		}
		if first == "" {
			return false, "not running"
		}
		b := f.binding("stateful", "db-statefulset")
		for _, it := range b.Status.AggregatedStatus {
			if it.ClusterName == first && it.Status != nil && strings.Contains(string(it.Status.Raw), revision) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("aggregated status %+v", b.Status.AggregatedStatus)
	})
	second = map[string]string{"member-1": "member-2", "member-2": "member-1"}[first]
	watch := f.watchNeverTwice("stateful", "db", first, second)

	task := f.killAndAwaitEviction(t, "stateful", "db-statefulset", first)
	if task.PurgeMode != v1alpha1.PurgeModeDirectly || task.PreservedLabelState["example.com/revision"] != revision ||
		len(task.ClustersBeforeFailover) != 1 || task.ClustersBeforeFailover[0] != first || task.PreservedStateObservedAt == nil {
		t.Errorf("eviction task %+v, want Directly with example.com/revision=%s from %s", task, revision, first)
	}
	if !strings.Contains(task.Message, "the last status the hub holds: "+first+" is unreachable, the hub last heard from its agent") {
		t.Errorf("task message %q does not say how old the preserved state is", task.Message)
	}
	waitFor(t, 30*time.Second, "the hub says the new copy waits for the old one", func() (bool, string) {
		n := eventCount(t, f.hub, "ResourceBinding", "stateful", "db-statefulset", "WaitingForOldCopy")
		return n > 0, fmt.Sprintf("%d events", n)
	})
	if works := f.worksOf("stateful/db-statefulset"); workIn(works, second).Name != "" {
		t.Errorf("a Work in %s while the old copy is not gone: %s", second, workSummary(works))
	}

	if err := f.agents[first].Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "db gone from "+first+" and running in "+second, func() (bool, string) {
		_, errOld := f.clients[first].AppsV1().StatefulSets("stateful").Get(t.Context(), "db", metav1.GetOptions{})
		s, err := f.clients[second].AppsV1().StatefulSets("stateful").Get(t.Context(), "db", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("old: %v; new: %v", errOld, err)
		}
		return apierrors.IsNotFound(errOld) && s.Status.ReadyReplicas == 1, fmt.Sprintf("old: %v; new ready %d", errOld, s.Status.ReadyReplicas)
	})
	s, err := f.clients[second].AppsV1().StatefulSets("stateful").Get(t.Context(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Labels["example.com/revision"]; got != revision {
		t.Errorf("the new copy's label example.com/revision = %q, want %q (labels %v)", got, revision, s.Labels)
	}
	watch.stop()
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.both) > 0 {
		t.Errorf("db was in both clusters at %d of %d polls: %v", len(watch.both), watch.polls, watch.both)
	}
	t.Logf("%d polls, never in both clusters", watch.polls)
}

// killAndAwaitEviction kills the agent of cluster and waits until the
// binding namespace/name, placed on one cluster, leaves it for another:
// it returns the eviction task.
func (f *fleet) killAndAwaitEviction(t *testing.T, namespace, name, cluster string) v1alpha1.GracefulEvictionTask {
	t.Helper()
	if err := f.agents[cluster].Kill(); err != nil {
		t.Fatal(err)
	}
	var task v1alpha1.GracefulEvictionTask
	waitFor(t, testGrace+testEvictionTimeout+30*time.Second, name+" evicted from "+cluster, func() (bool, string) {
		b := f.binding(namespace, name)
		if tk := taskFrom(b, cluster); tk != nil && len(b.Spec.Clusters) == 1 {
			task = *tk
			return true, ""
		}
		return false, fmt.Sprintf("clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
	})
	return task
}
