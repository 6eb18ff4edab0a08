package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNow is the fixed clock of every test.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ago is a metav1.Time d before testNow.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func microAgo(d time.Duration) *metav1.MicroTime {
	t := metav1.NewMicroTime(testNow.Add(-d))
	return &t
}

func ptr[T any](v T) *T { return &v }

// result is what one run of flotilla produced.
type result struct {
	code           int
	stdout, stderr string
}

// run runs flotilla against hub (through $FLOTILLA_SERVER) at testNow.
func run(t *testing.T, hub *fakeHub, args ...string) result {
	t.Helper()
	return runEnv(t, map[string]string{"FLOTILLA_SERVER": hub.URL}, args...)
}

// runEnv runs flotilla with exactly the environment env.
func runEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runApp(t, env, "", args...)
}

// runStdin runs flotilla against hub with stdin as its standard input.
func runStdin(t *testing.T, hub *fakeHub, stdin string, args ...string) result {
	t.Helper()
	return runApp(t, map[string]string{"FLOTILLA_SERVER": hub.URL}, stdin, args...)
}

func runApp(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := &App{
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: &stderr,
		Now:    func() time.Time { return testNow },
		Getenv: func(k string) string { return env[k] },
	}
	code := app.Run(context.Background(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantExit fails the test unless r exited with code.
func wantExit(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// squeeze collapses runs of blanks, so a test of aligned output does not
// depend on column widths.
func squeeze(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// newFixtureHub is a hub with three clusters in different states, their
// leases and a few events.
func newFixtureHub(t *testing.T) *fakeHub {
	t.Helper()
	h := newFakeHub(t)
	h.addCluster(healthyCluster())
	h.addCluster(unreachableCluster())
	h.addCluster(v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "lab", CreationTimestamp: ago(10 * time.Second)}})
	h.addLease(lease("edge-1", "edge-1-agent-7c9f", 3*time.Second, ptr(int32(1))))
	h.addLease(lease("edge-2", "edge-2-agent-a1", 95*time.Second, nil))
	l := lease("lab", "", 25*time.Second, nil)
	l.Spec.HolderIdentity = nil
	h.addLease(l)
	h.events = []corev1.Event{
		event("edge-1", "Normal", "ClusterRegistered", "agent edge-1-agent-7c9f registered", 3*time.Hour, 1),
		event("edge-1", "Normal", "ClusterReady", "cluster is ready", 2*time.Hour, 2),
		event("edge-2", "Warning", "ClusterUnreachable", "lease expired", 90*time.Second, 1),
	}
	return h
}

func healthyCluster() v1alpha1.Cluster {
	return v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "edge-1", CreationTimestamp: ago(72 * time.Hour),
			Labels: map[string]string{"site": "lisbon", "env": "prod"},
		},
		Spec: v1alpha1.ClusterSpec{Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a"},
		Status: v1alpha1.ClusterStatus{
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonClusterReady,
					Message: "cluster is healthy\nand ready", LastTransitionTime: ago(2 * time.Hour)},
				{Type: v1alpha1.ClusterConditionClockSynced, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonClockSynced,
					LastTransitionTime: ago(150 * time.Minute)},
			},
			KubernetesVersion: "v1.31.2",
			NodeSummary:       &v1alpha1.NodeSummary{TotalNum: 3, ReadyNum: 3},
			ResourceSummary: &v1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourceCPU: resource.MustParse("8"),
					corev1.ResourcePods: resource.MustParse("110"),
				},
				Allocated: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("2500m"), corev1.ResourceMemory: resource.MustParse("8Gi"),
				},
			},
			Agent: &v1alpha1.AgentStatus{Version: "v0.1.0", ConnectedTo: "hub-0", ConnectedAt: agoPtr(2 * time.Hour), ClockSkew: "12ms"},
		},
	}
}

func unreachableCluster() v1alpha1.Cluster {
	return v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-2", CreationTimestamp: ago(45 * time.Minute)},
		Spec: v1alpha1.ClusterSpec{
			Provider: "onprem", Unschedulable: true,
			Taints: []corev1.Taint{
				{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: agoPtr(90 * time.Second)},
				{Key: v1alpha1.TaintClusterUnschedulable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: agoPtr(30 * time.Minute)},
				{Key: "team", Value: "payments", Effect: corev1.TaintEffectPreferNoSchedule, TimeAdded: agoPtr(20 * time.Minute)},
			},
		},
		Status: v1alpha1.ClusterStatus{
			Conditions: []metav1.Condition{{
				Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonLeaseExpired,
				Message: "cluster lease expired", LastTransitionTime: ago(90 * time.Second),
			}},
			KubernetesVersion: "v1.30.4",
			NodeSummary:       &v1alpha1.NodeSummary{TotalNum: 4, ReadyNum: 2},
			Agent:             &v1alpha1.AgentStatus{Version: "v0.1.0"},
		},
	}
}

// lease is a 40s lease renewed renewed ago and acquired two hours ago.
func lease(name, holder string, renewed time.Duration, transitions *int32) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: ptr(int32(40)),
			AcquireTime:          microAgo(2 * time.Hour),
			RenewTime:            microAgo(renewed),
			LeaseTransitions:     transitions,
		},
	}
}

func event(cluster, typ, reason, msg string, last time.Duration, count int32) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: cluster + "." + reason, Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: v1alpha1.KindCluster, Name: cluster, APIVersion: v1alpha1.APIVersion},
		Type:           typ, Reason: reason, Message: msg, Count: count,
		FirstTimestamp: ago(last + time.Hour), LastTimestamp: ago(last),
	}
}
