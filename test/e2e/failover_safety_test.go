package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// safetyYAML has three workloads in namespace safe:
//   - dup: Duplicated on 2 of the 3 clusters (spread by cluster, min = max = 2);
//   - solo: only member-1 may run it;
//   - stuck: 1 replica of 4 CPU divided over member-2 and member-3 by static
//     weights 2:1 (which do not look at room; unequal, so the replica goes
//     to member-2 whatever the template's UID, which breaks exact ties), so
//     on member-3, filled by hand, its pod stays Pending.
const safetyYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: dup, namespace: safe}
spec:
  replicas: 1
  selector: {matchLabels: {app: dup}}
  template:
    metadata: {labels: {app: dup}}
    spec: {containers: [{name: c, image: busybox:dup, resources: {requests: {cpu: 100m}}}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: dup, namespace: safe}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: dup}]
  placement:
    spreadConstraints: [{spreadByField: cluster, minGroups: 2, maxGroups: 2}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: safe}
spec:
  replicas: 1
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec: {containers: [{name: c, image: busybox:solo}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: solo, namespace: safe}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: solo}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: stuck, namespace: safe}
spec:
  replicas: 1
  selector: {matchLabels: {app: stuck}}
  template:
    metadata: {labels: {app: stuck}}
    spec: {containers: [{name: c, image: busybox:stuck, resources: {requests: {cpu: "4"}}}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: stuck, namespace: safe}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: stuck}]
  placement:
    clusterAffinity: {clusterNames: [member-2, member-3]}
    replicaScheduling:
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member-2]}, weight: 2}
          - {targetCluster: {clusterNames: [member-3]}, weight: 1}
`

// flakyYAML is a 4-CPU Deployment placed on member-3 (full, so its pod
// stays Pending: never healthy), with application failover after 3 s.
const flakyYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: flaky, namespace: safe}
spec:
  replicas: 1
  selector: {matchLabels: {app: flaky}}
  template:
    metadata: {labels: {app: flaky}}
    spec: {containers: [{name: c, image: busybox:flaky, resources: {requests: {cpu: "4"}}}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: flaky, namespace: safe}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: flaky}]
  placement:
    clusterAffinity: {clusterNames: [member-2, member-3]}
    replicaScheduling:
      replicaSchedulingType: Divided
      weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [member-3]}, weight: 1}]}
  failover:
    application:
      decisionConditions: {tolerationSeconds: 3}
      gracePeriodSeconds: 30
`

// safetyGrace is the graceful eviction timeout of TestFailoverSafety.
const safetyGrace = 8 * time.Second

// placements is every binding's spec.clusters and eviction tasks, for
// "nothing moved" checks.
func (f *fleet) placements(namespace string) map[string]string {
	f.t.Helper()
	var list v1alpha1.ResourceBindingList
	f.hub.getJSON(f.t, "/apis/flotilla.io/v1alpha1/namespaces/"+namespace+"/resourcebindings", &list)
	out := map[string]string{}
	for _, b := range list.Items {
		out[b.Name] = fmt.Sprintf("clusters %v, tasks from %v", b.Spec.Clusters, b.Spec.EvictingClusters())
	}
	return out
}

// holdFor checks cond at every poll until d has passed: the way to see
// that something does not happen with processes on their own clocks.
func holdFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, seen := cond(); !ok {
			t.Fatalf("%s no longer holds: %s", what, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFailoverSafety: a Duplicated workload's failed cluster is replaced
// by the third; a workload no other cluster may run keeps its Work and
// task past the grace period and stays when its cluster recovers; a hub
// killed during an eviction completes it exactly once after its restart;
// and with every agent gone nothing is evicted, and nothing moves when
// they return.
func TestFailoverSafety(t *testing.T) {
	f := startFleet(t, 3, append(failoverFlags, "--graceful-eviction-timeout="+safetyGrace.String())...)
	f.filler("member-3", "safe", 3, "6")
	f.apply("safety.yaml", safetyYAML)
	for name, want := range map[string]map[string]int32{
		"dup": {"member-1": 1, "member-2": 1}, "solo": {"member-1": 1}, "stuck": {"member-2": 1},
	} {
		f.waitDeploymentsOf("safe", name, want, "")
	}
	soloUID := f.deployment("member-1", "safe", "solo").UID

	t.Run("application failover: never healthy on member-3, moved to member-2", func(t *testing.T) {
		path := f.writeFile("flaky.yaml", flakyYAML)
		ensureNamespaces(t, f.hub, flakyYAML)
		mustFlotilla(t, f.hub, "apply", "-f", path)
		var task v1alpha1.GracefulEvictionTask
		waitFor(t, 30*time.Second, "flaky evicted from member-3 for ApplicationFailure", func() (bool, string) {
			b := f.binding("safe", "flaky-deployment")
			if b == nil {
				return false, "no binding yet"
			}
			tk := taskFrom(b, "member-3")
			if tk != nil {
				task = *tk
			}
			return tk != nil, fmt.Sprintf("clusters %v, tasks %v", b.Spec.Clusters, b.Spec.EvictingClusters())
		})
		if task.Reason != "ApplicationFailure" || task.Producer != "ApplicationFailover" || task.GracePeriodSeconds == nil || *task.GracePeriodSeconds != 30 {
			t.Errorf("task %+v", task)
		}
		f.waitDeploymentsOf("safe", "flaky", map[string]int32{"member-2": 1}, "")
		waitFor(t, 30*time.Second, "flaky's task ended and its member-3 copy gone", func() (bool, string) {
			b := f.binding("safe", "flaky-deployment")
			d := f.deployment("member-3", "safe", "flaky")
			return len(b.Spec.GracefulEvictionTasks) == 0 && d == nil, fmt.Sprintf("tasks %v, member-3: %s", b.Spec.EvictingClusters(), deploymentState(d))
		})
		mustFlotilla(t, f.hub, "delete", "-f", path)
	})

	t.Run("member-1 fails: dup moves to member-3, solo has nowhere to go and stays", func(t *testing.T) {
		if err := f.agents["member-1"].Kill(); err != nil {
			t.Fatal(err)
		}
		f.waitDeploymentsOf("safe", "dup", map[string]int32{"member-2": 1, "member-3": 1}, "")
		var task v1alpha1.GracefulEvictionTask
		waitFor(t, 30*time.Second, "solo evicted from member-1, unschedulable", func() (bool, string) {
			b := f.binding("safe", "solo-deployment")
			tk := taskFrom(b, "member-1")
			if tk != nil {
				task = *tk
			}
			return tk != nil && len(b.Spec.Clusters) == 0, fmt.Sprintf("clusters %v tasks %v", b.Spec.Clusters, b.Spec.EvictingClusters())
		})
		// Past the grace period, the task and the Work stay: no purge
		// without a replacement.
		holdFor(t, time.Until(task.CreationTimestamp.Add(safetyGrace+2*time.Second)), "solo's task and Work kept", func() (bool, string) {
			b := f.binding("safe", "solo-deployment")
			works := f.worksOf("safe/solo-deployment")
			return taskFrom(b, "member-1") != nil && len(works) == 1 && works[0].DeletionTimestamp == nil,
				fmt.Sprintf("tasks %v, Works %d", b.Spec.EvictingClusters(), len(works))
		})
		b := f.binding("safe", "solo-deployment")
		if !strings.Contains(describeScheduled(b), "being evicted") {
			t.Errorf("solo's Scheduled condition: %s", describeScheduled(b))
		}
		waitFor(t, 30*time.Second, "dup's task ended", func() (bool, string) {
			b := f.binding("safe", "dup-deployment")
			return len(b.Spec.GracefulEvictionTasks) == 0, fmt.Sprint(b.Spec.EvictingClusters())
		})
	})

	t.Run("member-1 returns: solo stays on it, dup's old copy goes", func(t *testing.T) {
		if err := f.agents["member-1"].Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, f.hub, "member-1", 30*time.Second)
		waitFor(t, 30*time.Second, "solo back on member-1 without a task, dup gone from member-1", func() (bool, string) {
			b := f.binding("safe", "solo-deployment")
			d := f.deployment("member-1", "safe", "dup")
			return cmp.Equal(b.Spec.Clusters, []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}}) && len(b.Spec.GracefulEvictionTasks) == 0 && d == nil,
				fmt.Sprintf("solo clusters %v tasks %v; dup on member-1: %s", b.Spec.Clusters, b.Spec.EvictingClusters(), deploymentState(d))
		})
		if d := f.deployment("member-1", "safe", "solo"); d == nil || d.UID != soloUID || !available(d) {
			t.Errorf("solo on member-1 is not the one that ran before the outage: %v", d)
		}
		if b := f.binding("safe", "dup-deployment"); !cmp.Equal(b.Spec.Clusters, []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 1}, {Name: "member-3", Replicas: 1}}) {
			t.Errorf("dup moved again when member-1 came back: %v", b.Spec.Clusters)
		}
	})

	t.Run("a hub killed during an eviction completes it exactly once", func(t *testing.T) {
		before := f.binding("safe", "stuck-deployment")
		if err := f.agents["member-2"].Kill(); err != nil {
			t.Fatal(err)
		}
		var task v1alpha1.GracefulEvictionTask
		// The eviction and its replacement are one write: wait for its event
		// too, which the hub sends after the write, so that the count below
		// is of evictions, not of events a kill lost.
		waitFor(t, 30*time.Second, "stuck evicted from member-2 to member-3", func() (bool, string) {
			b := f.binding("safe", "stuck-deployment")
			tk := taskFrom(b, "member-2")
			if tk != nil {
				task = *tk
			}
			events := eventCount(t, f.hub, "ResourceBinding", "safe", "stuck-deployment", "Evicted")
			return tk != nil && cmp.Equal(b.Spec.Clusters, []v1alpha1.TargetCluster{{Name: "member-3", Replicas: 1}}) && events == 1,
				fmt.Sprintf("clusters %v tasks %v, %d Evicted events", b.Spec.Clusters, b.Spec.EvictingClusters(), events)
		})
		// The replacement's pod is Pending (member-3 is full): the task waits.
		if err := f.hub.Kill(); err != nil {
			t.Fatal(err)
		}
		f.hub.start(t)
		for _, name := range []string{"member-1", "member-3"} {
			waitReady(t, f.hub, name, 30*time.Second)
		}
		b := f.binding("safe", "stuck-deployment")
		if tk := taskFrom(b, "member-2"); tk == nil || !tk.CreationTimestamp.Equal(task.CreationTimestamp) || len(b.Spec.GracefulEvictionTasks) != 1 {
			t.Fatalf("after the restart the task is %+v, want the one from before (%v)", b.Spec.GracefulEvictionTasks, task.CreationTimestamp)
		}
		// Make room on member-3: the replacement runs, the task ends.
		if err := f.clients["member-3"].AppsV1().Deployments("safe").Delete(t.Context(), "filler", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitDeploymentsOf("safe", "stuck", map[string]int32{"member-3": 1}, "")
		waitFor(t, 30*time.Second, "stuck's task ended", func() (bool, string) {
			b := f.binding("safe", "stuck-deployment")
			return len(b.Spec.GracefulEvictionTasks) == 0, fmt.Sprint(b.Spec.EvictingClusters())
		})
		// Every spec change is a generation (the eviction, the new placement,
		// the task's end): count the evictions themselves.
		if n := eventCount(t, f.hub, "ResourceBinding", "safe", "stuck-deployment", "Evicted"); n != 1 {
			t.Errorf("%d Evicted events on stuck-deployment (generation %d before): want exactly one eviction across the restart", n, before.Generation)
		}
		if works := f.worksOf("safe/stuck-deployment"); len(works) != 2 || workIn(works, "member-3").Generation != 1 {
			t.Errorf("stuck's Works: %s, want member-2's (kept until its agent confirms) and member-3's rendered once", workSummary(works))
		}
		if err := f.agents["member-2"].Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, f.hub, "member-2", 30*time.Second)
		waitFor(t, 30*time.Second, "stuck gone from member-2", func() (bool, string) {
			d := f.deployment("member-2", "safe", "stuck")
			return d == nil, deploymentState(d)
		})
	})

	t.Run("every agent gone: nothing evicted, nothing moves when they return", func(t *testing.T) {
		waitFor(t, 30*time.Second, "no eviction task left", func() (bool, string) {
			placed := f.placements("safe")
			return !strings.Contains(fmt.Sprint(placed), "tasks from [m"), fmt.Sprint(placed)
		})
		placed := f.placements("safe")
		evictions := f.stats().Failover.Evictions
		for _, a := range f.agents {
			if err := a.Kill(); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, testGrace+testEvictionTimeout+10*time.Second, "every cluster NoExecute, zone Isolated", func() (bool, string) {
			tainted, seen := 0, []string{}
			for name := range f.agents {
				c := f.hub.cluster(t, name)
				if !taintAdded(c, v1alpha1.TaintClusterUnreachable, "NoExecute").IsZero() || !taintAdded(c, v1alpha1.TaintClusterNotReady, "NoExecute").IsZero() {
					tainted++
				}
				seen = append(seen, describe(c))
			}
			modes := f.stats().Failover.ZoneModes
			return tainted == 3 && modes["default"] == "Isolated", fmt.Sprintf("%d NoExecute, zones %v; %s", tainted, modes, strings.Join(seen, "; "))
		})
		holdFor(t, testToleration+2*time.Second, "no eviction while isolated", func() (bool, string) {
			now := f.placements("safe")
			return cmp.Equal(placed, now), cmp.Diff(placed, now)
		})
		for _, a := range f.agents {
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
		}
		for name := range f.agents {
			waitReady(t, f.hub, name, 30*time.Second)
		}
		holdFor(t, testToleration+time.Second, "nothing moved after the return", func() (bool, string) {
			now := f.placements("safe")
			return cmp.Equal(placed, now), cmp.Diff(placed, now)
		})
		if got := f.stats().Failover.Evictions; got != evictions {
			t.Errorf("%d evictions while every agent was gone", got-evictions)
		}
	})
}

// worksOf lists the Works of a binding (NAMESPACE/NAME).
func (f *fleet) worksOf(binding string) []v1alpha1.Work {
	f.t.Helper()
	var list v1alpha1.WorkList
	f.hub.getJSON(f.t, "/apis/flotilla.io/v1alpha1/works", &list)
	var out []v1alpha1.Work
	for _, w := range list.Items {
		if w.Annotations[v1alpha1.AnnotationWorkBinding] == binding {
			out = append(out, w)
		}
	}
	return out
}

func workIn(works []v1alpha1.Work, cluster string) v1alpha1.Work {
	for _, w := range works {
		if w.Namespace == v1alpha1.ExecutionNamespace(cluster) {
			return w
		}
	}
	return v1alpha1.Work{}
}

func workSummary(works []v1alpha1.Work) string {
	var parts []string
	for _, w := range works {
		parts = append(parts, fmt.Sprintf("%s generation %d deleting=%v", w.Namespace, w.Generation, w.DeletionTimestamp != nil))
	}
	return strings.Join(parts, "; ")
}

func describeScheduled(b *v1alpha1.ResourceBinding) string {
	for _, c := range b.Status.Conditions {
		if c.Type == v1alpha1.BindingConditionScheduled {
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "no Scheduled condition"
}
