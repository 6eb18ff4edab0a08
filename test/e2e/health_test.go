package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	hubstats "github.com/flotilla-io/flotilla/hub/stats"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// detectionSlack is how late after its deadline an Unknown may be observed:
// the poll period plus process scheduling on a busy 2-core machine.
const detectionSlack = 1500 * time.Millisecond

// TestClusterHealth runs the failure-detection path with real processes:
// register → Ready; SIGKILL the agent → Unknown at the grace period and not
// before, unreachable:NoSchedule, then NoExecute after the eviction timeout;
// agent back → Ready and no taints; member API server stopped while its
// agent lives → Ready=False with not-ready:NoSchedule, and back.
func TestClusterHealth(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(2)...)
	h := startHub(t)
	member1, member2 := env.Cluster("member-1"), env.Cluster("member-2")
	agent1 := startAgent(t, h, member1)
	startAgent(t, h, member2)
	for _, name := range []string{"member-1", "member-2"} {
		waitReady(t, h, name, 30*time.Second)
	}
	// Ready comes with the lease; the status report follows on its own stream.
	var c *v1alpha1.Cluster
	waitFor(t, 10*time.Second, "member-1's version and 3 ready nodes", func() (bool, string) {
		c = h.cluster(t, "member-1")
		return c.Status.KubernetesVersion == "v1.37.2" && c.Status.NodeSummary != nil && c.Status.NodeSummary.ReadyNum == 3,
			fmt.Sprintf("version %q nodes %+v", c.Status.KubernetesVersion, c.Status.NodeSummary)
	})
	if c.Status.Agent == nil || c.Status.Agent.ConnectedTo != "e2e-hub" {
		t.Errorf("member-1 agent status = %+v, want connectedTo e2e-hub", c.Status.Agent)
	}

	t.Run("agent killed: Unknown at the grace period, then NoExecute", func(t *testing.T) {
		// Measure the lease grace itself, not the hub's start-up grace.
		restartGraceEnds := h.readyAt.Add(testGrace + testLeaseDuration)
		waitFor(t, time.Until(restartGraceEnds)+5*time.Second, "the hub's start-up grace to end", func() (bool, string) {
			return time.Now().After(restartGraceEnds), "start-up grace"
		})
		if err := agent1.Kill(); err != nil {
			t.Fatal(err)
		}
		var unknownAt time.Time
		waitFor(t, testGrace+10*time.Second, "member-1 Unknown", func() (bool, string) {
			c := h.cluster(t, "member-1")
			if readyOf(c) == metav1.ConditionUnknown {
				unknownAt = time.Now()
				return true, ""
			}
			return false, describe(c)
		})
		renewed := h.lease(t, "member-1").Spec.RenewTime.Time
		detection := unknownAt.Sub(renewed.Add(testGrace))
		t.Logf("last renewal %s, Unknown observed %v after the grace period", renewed.Format(time.RFC3339Nano), detection)
		if unknownAt.Sub(renewed) < testGrace {
			t.Errorf("Unknown observed %v after the last renewal, before the grace period %v", unknownAt.Sub(renewed), testGrace)
		}
		if detection > detectionSlack {
			t.Errorf("Unknown observed %v after it was due", detection)
		}
		c := h.cluster(t, "member-1")
		if !hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule) || hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute) {
			t.Errorf("right after Unknown: %s, want unreachable:NoSchedule only", describe(c))
		}
		waitFor(t, testEvictionTimeout+10*time.Second, "unreachable:NoExecute", func() (bool, string) {
			c := h.cluster(t, "member-1")
			return hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute), describe(c)
		})
		if waited := time.Since(unknownAt); waited < testEvictionTimeout-detectionSlack {
			t.Errorf("NoExecute came %v after Unknown, before the eviction timeout %v", waited, testEvictionTimeout)
		}
		if readyOf(h.cluster(t, "member-2")) != metav1.ConditionTrue {
			t.Errorf("member-2 must stay Ready: %s", describe(h.cluster(t, "member-2")))
		}
	})

	t.Run("agent back: Ready, taints gone", func(t *testing.T) {
		if err := agent1.Start(); err != nil {
			t.Fatal(err)
		}
		waitReady(t, h, "member-1", 30*time.Second)
	})

	t.Run("member API server down while its agent lives: Ready=False, not-ready", func(t *testing.T) {
		if err := member2.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "member-2 not ready", func() (bool, string) {
			c := h.cluster(t, "member-2")
			return readyOf(c) == metav1.ConditionFalse && hasTaint(c, v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule), describe(c)
		})
		if err := member2.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitReady(t, h, "member-2", 30*time.Second)
	})

	t.Run("events record the transitions", func(t *testing.T) {
		var events corev1.EventList
		h.getJSON(t, "/api/v1/events?fieldSelector=involvedObject.kind%3DCluster,involvedObject.name%3Dmember-1", &events)
		reasons := map[string]bool{}
		for _, ev := range events.Items {
			reasons[ev.Reason] = true
		}
		for _, want := range []string{"Registered", "AgentConnected", v1alpha1.ReasonLeaseExpired, "TaintAdded", "TaintRemoved", v1alpha1.ReasonClusterReady} {
			if !reasons[want] {
				t.Errorf("no %s event for member-1 among %v", want, reasons)
			}
		}
	})
}

// TestHubRestart kills the hub and starts it again on the same data: the
// clusters, leases and taints are still there, and no cluster whose agent
// lives goes Unknown during the restart grace.
func TestHubRestart(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(2)...)
	h := startHub(t)
	startAgent(t, h, env.Cluster("member-1"))
	agent2 := startAgent(t, h, env.Cluster("member-2"))
	waitReady(t, h, "member-1", 30*time.Second)
	waitReady(t, h, "member-2", 30*time.Second)
	if err := agent2.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "member-2 unreachable", func() (bool, string) {
		c := h.cluster(t, "member-2")
		return hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule), describe(c)
	})
	before := h.cluster(t, "member-2")
	uid1 := h.cluster(t, "member-1").UID
	// Batching means a crash loses what is not stored yet; wait until the
	// clusters checked below are in the store. (Leases are: they were
	// created several lease flushes ago, and renewals only refresh them.)
	waitFor(t, 10*time.Second, "the hub to store its cluster changes", func() (bool, string) {
		var st hubstats.Stats
		h.getJSON(t, "/debug/stats", &st)
		return st.UnstoredClusters == 0, fmt.Sprintf("%+v", st)
	})

	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	restartedAt := time.Now()

	c1, c2 := h.cluster(t, "member-1"), h.cluster(t, "member-2")
	if c1 == nil || c1.UID != uid1 {
		t.Fatalf("member-1 after restart: %+v, want the same object (uid %s)", c1, uid1)
	}
	if readyOf(c2) != metav1.ConditionUnknown || !hasTaint(c2, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule) {
		t.Errorf("member-2 after restart: %s, want Unknown with its unreachable taint", describe(c2))
	}
	for _, taint := range before.Spec.Taints {
		if !hasTaint(c2, taint.Key, taint.Effect) {
			t.Errorf("taint %s:%s lost in the restart", taint.Key, taint.Effect)
		}
	}
	if h.lease(t, "member-1") == nil || h.lease(t, "member-2") == nil {
		t.Error("leases lost in the restart")
	}
	// Watch member-1 through the whole restart grace and a bit more: its
	// agent reconnects and it must never be seen Unknown.
	watchUntil := restartedAt.Add(testGrace + testLeaseDuration + time.Second)
	waitFor(t, time.Until(watchUntil)+5*time.Second, "the restart grace to pass", func() (bool, string) {
		c := h.cluster(t, "member-1")
		if readyOf(c) != metav1.ConditionTrue {
			t.Fatalf("member-1 went %s during the restart grace: %s", readyOf(c), describe(c))
		}
		return time.Now().After(watchUntil), describe(c)
	})
}
