package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Failover timings for tests: a cut-off cluster is Unknown after
// testGrace, NoExecute testEvictionTimeout later, and its workloads are
// evicted when the default toleration of testToleration runs out.
const testToleration = 2 * time.Second

// failoverFlags are the hub flags of the failover tests: clusters that
// fail one after the other are admitted to eviction without waiting for
// the zone's rate (0.1 clusters/s by default).
var failoverFlags = []string{
	fmt.Sprintf("--default-unreachable-toleration-seconds=%d", int(testToleration/time.Second)),
	fmt.Sprintf("--default-not-ready-toleration-seconds=%d", int(testToleration/time.Second)),
	"--graceful-eviction-timeout=2m", "--cluster-eviction-rate=50",
}

// failbackStabilization is nginx-fb's failback.stabilizationSeconds.
const failbackStabilization = 3 * time.Second

// failbackYAML is the seed example as nginx-fb, with failback.
func failbackYAML() string {
	return variantYAML("nginx-fb", fmt.Sprintf("  failover: {cluster: {failback: {stabilizationSeconds: %d}}}\n", int(failbackStabilization/time.Second)))
}

// variantYAML is the seed example under another name, with more policy
// spec (indented for spec:).
func variantYAML(name, policySpec string) string {
	r := strings.NewReplacer("name: nginx\n", "name: "+name+"\n", "app: nginx}", "app: "+name+"}", "name: nginx-propagation", "name: "+name)
	return r.Replace(nginxYAML) + "---\n" + r.Replace(policyYAML) + policySpec
}

// taintAdded returns when the cluster got the taint, or zero.
func taintAdded(c *v1alpha1.Cluster, key string, effect corev1.TaintEffect) time.Time {
	for _, t := range c.Spec.Taints {
		if t.Key == key && t.Effect == effect && t.TimeAdded != nil {
			return t.TimeAdded.Time
		}
	}
	return time.Time{}
}

func taskFrom(b *v1alpha1.ResourceBinding, cluster string) *v1alpha1.GracefulEvictionTask {
	for i := range b.Spec.GracefulEvictionTasks {
		if b.Spec.GracefulEvictionTasks[i].FromCluster == cluster {
			return &b.Spec.GracefulEvictionTasks[i]
		}
	}
	return nil
}

// TestFailoverSeedScenario is the seed example's failover: nginx 1:2 on
// member-1 and member-2; member-1's agent dies; after Unknown,
// unreachable:NoSchedule, NoExecute and the toleration, member-2 runs all
// 3 replicas, the eviction task ends, and member-1's copy is deleted when
// its agent comes back. The placement does not move back by itself; a
// WorkloadRebalancer moves it back.
func TestFailoverSeedScenario(t *testing.T) {
	f := startFleet(t, 3, failoverFlags...)
	f.apply("seed.yaml", nginxYAML+"---\n"+policyYAML)
	// The same, with failback: it returns to member-1 by itself.
	f.apply("failback.yaml", failbackYAML())
	// And with purgeMode Never: member-1 keeps its copy until purged by hand.
	f.apply("keep.yaml", variantYAML("nginx-keep", "  failover: {cluster: {purgeMode: Never}}\n"))
	f.waitDeployments(map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")
	f.waitDeploymentsOf("web", "nginx-fb", map[string]int32{"member-1": 1, "member-2": 2}, "")
	f.waitDeploymentsOf("web", "nginx-keep", map[string]int32{"member-1": 1, "member-2": 2}, "")

	killed := time.Now()
	if err := f.agents["member-1"].Kill(); err != nil {
		t.Fatal(err)
	}
	var noExecuteAt time.Time
	waitFor(t, testGrace+testEvictionTimeout+10*time.Second, "member-1 Unknown with unreachable:NoExecute", func() (bool, string) {
		c := f.hub.cluster(t, "member-1")
		noExecuteAt = taintAdded(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)
		return !noExecuteAt.IsZero(), describe(c)
	})

	var task v1alpha1.GracefulEvictionTask
	waitFor(t, 30*time.Second, "binding evicted from member-1", func() (bool, string) {
		b := f.binding("web", "nginx-deployment")
		if tk := taskFrom(b, "member-1"); tk != nil {
			task = *tk
			return true, ""
		}
		return false, fmt.Sprintf("clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
	})
	if evictedAfter := task.CreationTimestamp.Sub(noExecuteAt); evictedAfter < testToleration-time.Second {
		// Timestamps are whole seconds: allow one second of rounding.
		t.Errorf("evicted %v after NoExecute, before the %v toleration ran out", evictedAfter, testToleration)
	}
	if task.Reason != "TaintUntolerated" || task.Producer != "TaintManager" || task.PurgeMode != v1alpha1.PurgeModeGracefully || task.Replicas == nil || *task.Replicas != 1 {
		t.Errorf("eviction task %+v", task)
	}
	t.Logf("agent killed → NoExecute %v → evicted %v", noExecuteAt.Sub(killed).Round(100*time.Millisecond), task.CreationTimestamp.Sub(noExecuteAt))

	f.waitDeployments(map[string]int32{"member-2": 3}, "nginx:1.27")
	f.waitDeploymentsOf("web", "nginx-fb", map[string]int32{"member-2": 3}, "")
	f.waitDeploymentsOf("web", "nginx-keep", map[string]int32{"member-2": 3}, "")
	waitFor(t, 30*time.Second, "eviction tasks ended", func() (bool, string) {
		b, fb := f.binding("web", "nginx-deployment"), f.binding("web", "nginx-fb-deployment")
		return len(b.Spec.GracefulEvictionTasks) == 0 && len(fb.Spec.GracefulEvictionTasks) == 0,
			fmt.Sprintf("tasks %v and %v", b.Spec.EvictingClusters(), fb.Spec.EvictingClusters())
	})
	if d := f.deployment("member-1", "web", "nginx"); d == nil {
		t.Errorf("member-1's nginx is gone while its agent is down; nothing could have deleted it")
	}
	events := mustFlotilla(t, f.hub, "describe", "binding", "nginx-deployment", "-n", "web")
	for _, want := range []string{"Evicted", "EvictionTaskEnded"} {
		if !strings.Contains(events, want) {
			t.Errorf("describe binding lacks the %s event:\n%s", want, events)
		}
	}

	if err := f.agents["member-1"].Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, f.hub, "member-1", 30*time.Second)
	waitFor(t, 30*time.Second, "member-1's nginx deleted after its agent came back", func() (bool, string) {
		d := f.deployment("member-1", "web", "nginx")
		return d == nil, deploymentState(d)
	})
	readyAgain := time.Now()
	// With failback, nginx-fb returns once member-1 has been Ready for
	// the stabilization period; nginx, without, stays.
	f.waitDeploymentsOf("web", "nginx-fb", map[string]int32{"member-1": 1, "member-2": 2}, "")
	if took := time.Since(readyAgain); took < failbackStabilization-time.Second {
		t.Errorf("nginx-fb failed back %v after member-1 was Ready, before the %v stabilization", took, failbackStabilization)
	}
	b := f.binding("web", "nginx-deployment")
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("placement after member-1 came back (-want +got):\n%s", diff)
	}
	// A WorkloadRebalancer puts nginx back where its weights say.
	if out := mustFlotilla(t, f.hub, "rebalance", "deployment/nginx", "-n", "web"); !strings.Contains(out, "Successful") {
		t.Errorf("rebalance:\n%s", out)
	}
	f.waitDeployments(map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")

	// purgeMode Never: the task stayed, and member-1 still runs its copy
	// until someone purges it.
	keep := f.binding("web", "nginx-keep-deployment")
	if task := taskFrom(keep, "member-1"); task == nil || task.SuppressDeletion == nil || !*task.SuppressDeletion {
		t.Errorf("nginx-keep's tasks: %+v, want member-1's kept (suppressDeletion)", keep.Spec.GracefulEvictionTasks)
	}
	if d := f.deployment("member-1", "web", "nginx-keep"); d == nil {
		t.Errorf("nginx-keep's member-1 copy is gone before anyone purged it")
	}
	if out := mustFlotilla(t, f.hub, "describe", "binding", "nginx-keep-deployment", "-n", "web"); !strings.Contains(out, "purgeMode Never") {
		t.Errorf("describe binding does not say what the Never task waits for:\n%s", out)
	}
	mustFlotilla(t, f.hub, "purge", "binding", "nginx-keep-deployment", "-n", "web", "--cluster", "member-1")
	waitFor(t, 30*time.Second, "nginx-keep's member-1 copy purged", func() (bool, string) {
		d := f.deployment("member-1", "web", "nginx-keep")
		return d == nil, deploymentState(d)
	})
	if out, err := flotilla(t, f.hub, "purge", "binding", "nginx-keep-deployment", "-n", "web", "--cluster", "member-1"); err == nil || !strings.Contains(out, "no eviction task") {
		t.Errorf("a second purge: %v\n%s", err, out)
	}
	metrics := f.hub.metrics(t)
	for _, want := range []string{`flotilla_evictions_total{reason="TaintUntolerated",zone="default"} 3`,
		`flotilla_eviction_tasks_ended_total{outcome="ReplacementHealthy"} 2`, `flotilla_zone_mode{mode="Normal",zone="default"} 1`,
		// Karmada's names for the same, for Karmada's dashboards.
		`eviction_processing_total{name="binding-eviction",result="success"} 3`, `eviction_queue_depth{name="binding-eviction"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	// A Karmada dashboard's queries over the same series.
	checkPromQL(t, metrics, []string{"eviction_processing_total", "eviction_queue_depth", "eviction_processing_latency_seconds"}, []promQuery{
		{Expr: `sum by (name) (eviction_processing_total{result="success"})`, ExpSamples: []promSample{{`{name="binding-eviction"}`, 3}}},
		{Expr: `sum(eviction_queue_depth)`, ExpSamples: []promSample{{`{}`, 0}}},
		{Expr: `count by (name) (eviction_processing_latency_seconds_count >= 3)`, ExpSamples: []promSample{{`{name="binding-eviction"}`, 1}}},
	})
	st := f.stats()
	if st.Failover.Evictions != 3 || st.Failover.TasksEnded != 2 {
		t.Errorf("failover stats %+v, want 3 evictions and 2 tasks ended by the hub (the third by hand)", st.Failover)
	}
}
