package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// spreadYAML is a Deployment of 1-CPU replicas divided by the room the
// agents report (dynamicWeight: AvailableReplicas) over both clusters.
const spreadYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: spread, namespace: rebalance}
spec:
  replicas: 4
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      containers:
        - name: app
          image: busybox:1.37
          resources: {requests: {cpu: "1"}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: spread, namespace: rebalance}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: spread}]
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
`

// TestRebalance: a Deployment placed while member-2 was cordoned runs
// entirely on member-1 and stays there after the uncordon (Steady);
// flotilla rebalance gets its binding a Fresh schedule and the replicas
// spread over both clusters again. A rebalance of a workload without a
// binding fails with ReferencedBindingNotFound, and a Karmada
// WorkloadRebalancer applied with a TTL is deleted once it expires.
func TestRebalance(t *testing.T) {
	f := startFleet(t, 2)
	mustFlotilla(t, f.hub, "cordon", "member-2")
	waitFor(t, 10*time.Second, "member-2 cordoned", func() (bool, string) {
		c := f.hub.cluster(t, "member-2")
		return hasTaint(c, v1alpha1.TaintClusterUnschedulable, corev1.TaintEffectNoSchedule), describe(c)
	})
	f.apply("spread.yaml", spreadYAML)
	f.waitDeploymentsOf("rebalance", "spread", map[string]int32{"member-1": 4}, "")

	mustFlotilla(t, f.hub, "uncordon", "member-2")
	waitReady(t, f.hub, "member-2", 10*time.Second)
	b := f.binding("rebalance", "spread-deployment")
	lopsided := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 4}}
	if diff := cmp.Diff(lopsided, b.Spec.Clusters); diff != "" {
		t.Fatalf("placement after the uncordon (-want +got):\n%s", diff)
	}
	// The trigger (the rebalancer's creation time) must be later than the
	// last schedule, at the second's precision of both.
	waitFor(t, 5*time.Second, "a second later than the last schedule", func() (bool, string) {
		return time.Now().Truncate(time.Second).After(b.Status.LastScheduledTime.Time), b.Status.LastScheduledTime.String()
	})

	out := mustFlotilla(t, f.hub, "rebalance", "deployment/spread", "-n", "rebalance")
	t.Logf("flotilla rebalance:\n%s", out)
	if !strings.Contains(squeezeSpaces(out), "rebalance deployment.apps/spread Successful -") {
		t.Errorf("rebalance output lacks the Successful row:\n%s", out)
	}
	name := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "workloadrebalancer.apps.flotilla.io/"), " created")

	want := map[string]int32{"member-1": 2, "member-2": 2}
	f.waitDeploymentsOf("rebalance", "spread", want, "")
	b = f.binding("rebalance", "spread-deployment")
	if diff := cmp.Diff(targetsOf(want), b.Spec.Clusters); diff != "" {
		t.Errorf("placement after the rebalance (-want +got):\n%s", diff)
	}
	var rb appsv1alpha1.WorkloadRebalancer
	if code := f.hub.getJSON(t, "/apis/apps.flotilla.io/v1alpha1/workloadrebalancers/"+name, &rb); code != http.StatusOK {
		t.Fatalf("GET rebalancer %q: %d", name, code)
	}
	// The scheduler writes the placement (spec) before lastScheduledTime
	// (status), and the Works can land in between: wait for the status.
	waitFor(t, 10*time.Second, "the binding's lastScheduledTime not before its rescheduleTriggeredAt, the rebalancer's creation", func() (bool, string) {
		b = f.binding("rebalance", "spread-deployment")
		at := b.Spec.RescheduleTriggeredAt
		state := fmt.Sprintf("rescheduleTriggeredAt %v, lastScheduledTime %v, rebalancer created %v", at, b.Status.LastScheduledTime, rb.CreationTimestamp)
		return at != nil && at.Equal(&rb.CreationTimestamp) && !b.Status.LastScheduledTime.Before(at), state
	})
	if ttl := rb.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 300 || rb.Status.FinishTime == nil {
		t.Errorf("rebalancer: ttl %v, finishTime %v; want the CLI's 300 and a finish time", ttl, rb.Status.FinishTime)
	}
	if got := mustFlotilla(t, f.hub, "get", "workloadrebalancers"); !strings.Contains(squeezeSpaces(got), name+" 1 1 0 ") {
		t.Errorf("get workloadrebalancers lacks %s with 1 workload, 1 successful:\n%s", name, got)
	}

	t.Run("a workload without a binding fails", func(t *testing.T) {
		out, err := flotilla(t, f.hub, "rebalance", "deployment/missing", "-n", "rebalance", "--ttl", "0")
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("flotilla rebalance of a missing workload: %v, want exit 1\n%s", err, out)
		}
		if !strings.Contains(squeezeSpaces(out), "rebalance deployment.apps/missing Failed ReferencedBindingNotFound") ||
			!strings.Contains(out, "1 of 1 workloads failed") {
			t.Errorf("output:\n%s", out)
		}
	})

	t.Run("a Karmada document with a TTL is deleted after it", func(t *testing.T) {
		f.apply("rebalancer.yaml", `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: from-karmada}
spec:
  workloads:
    - {apiVersion: apps/v1, kind: Deployment, name: spread, namespace: rebalance}
  ttlSecondsAfterFinished: 1
`)
		waitFor(t, 10*time.Second, "from-karmada deleted after its TTL", func() (bool, string) {
			var got appsv1alpha1.WorkloadRebalancer
			code := f.hub.getJSON(t, "/apis/apps.flotilla.io/v1alpha1/workloadrebalancers/from-karmada", &got)
			return code == http.StatusNotFound, fmt.Sprintf("%d %+v", code, got.Status)
		})
		waitFor(t, 5*time.Second, "its events", func() (bool, string) {
			var events corev1.EventList
			f.hub.getJSON(t, "/api/v1/events?fieldSelector=involvedObject.kind%3DWorkloadRebalancer,involvedObject.name%3Dfrom-karmada", &events)
			var reasons []string
			for _, e := range events.Items {
				reasons = append(reasons, e.Reason)
			}
			return strings.Join(reasons, ",") == "RescheduleTriggered,Finished,Deleted", strings.Join(reasons, ",")
		})
		// A later trigger asks again; the placement stays spread.
		f.waitDeploymentsOf("rebalance", "spread", want, "")
	})
}

// squeezeSpaces collapses runs of blanks, so table rows compare without
// their alignment.
func squeezeSpaces(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}
