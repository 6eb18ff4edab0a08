package taintpolicy

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// fixture is the API server with the controller on a fake clock, its
// cluster writes counted, and a hook run before its next one.
type fixture struct {
	*controllertest.Fixture
	clk    *clocktesting.FakeClock
	writes atomic.Int64
	mu     sync.Mutex
	before func() // run once before the controller's next cluster write
	counts map[string]int
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t), counts: map[string]int{}}
	f.clk = clocktesting.NewFakeClock(f.T0)
	f.Start(f.wrap, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		c := New(clients, informers, f.Events, f.clk, controllertest.Logger(t), opts)
		c.SetObserver(func(policy, op string) {
			f.mu.Lock()
			f.counts[policy+" "+op]++
			f.mu.Unlock()
		})
		return c
	})
	return f
}

// wrap counts the controller's cluster updates and runs f.before first.
func (f *fixture) wrap(rt http.RoundTripper) http.RoundTripper {
	return controllertest.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/clusters/") && !strings.HasSuffix(req.URL.Path, "/status") {
			f.writes.Add(1)
			f.mu.Lock()
			before := f.before
			f.before = nil
			f.mu.Unlock()
			if before != nil {
				before()
			}
		}
		return rt.RoundTrip(req)
	})
}

func (f *fixture) cluster(name string, conditions map[string]metav1.ConditionStatus, taints ...corev1.Taint) {
	f.T.Helper()
	c, err := f.Flotilla.Clusters().Create(f.T.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"site": "edge"}},
		Spec: v1alpha1.ClusterSpec{Taints: taints}}, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	if len(conditions) > 0 {
		f.setConditions(c.Name, conditions)
	}
}

// setConditions sets condition statuses as the hub's registry would.
func (f *fixture) setConditions(name string, conditions map[string]metav1.ConditionStatus) {
	f.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := f.Flotilla.Clusters().Get(f.T.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for typ, status := range conditions {
			meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(f.T0)})
		}
		_, err = f.Flotilla.Clusters().UpdateStatus(f.T.Context(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// addTaint adds a taint as an operator would.
func (f *fixture) addTaint(name string, t corev1.Taint) {
	f.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := f.Flotilla.Clusters().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Taints = append(c.Spec.Taints, t)
		_, err = f.Flotilla.Clusters().Update(context.Background(), c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Error(err)
	}
}

func (f *fixture) policy(name string, spec v1alpha1.ClusterTaintPolicySpec) {
	f.T.Helper()
	if _, err := f.Flotilla.ClusterTaintPolicies().Create(f.T.Context(), &v1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// awaitTaints waits until the cluster's taints (key:Effect) and owners
// are want, and returns the cluster.
func (f *fixture) awaitTaints(name string, want []string, wantOwners string) *v1alpha1.Cluster {
	f.T.Helper()
	var got []string
	var c *v1alpha1.Cluster
	_ = wait.PollUntilContextTimeout(f.T.Context(), 10*time.Millisecond, controllertest.WaitTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if c, err = f.Flotilla.Clusters().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		got = nil
		for _, t := range c.Spec.Taints {
			got = append(got, v1alpha1.TaintOwnerKey(t))
		}
		return cmp.Equal(want, got, cmpopts.EquateEmpty()) && c.Annotations[v1alpha1.AnnotationTaintPolicies] == wantOwners, nil
	})
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		f.T.Fatalf("taints of %s (-want +got):\n%s", name, diff)
	}
	if owners := c.Annotations[v1alpha1.AnnotationTaintPolicies]; owners != wantOwners {
		f.T.Fatalf("owners of %s = %q, want %q", name, owners, wantOwners)
	}
	return c
}

var degraded = v1alpha1.ClusterTaintPolicySpec{
	AddOnConditions:    []v1alpha1.MatchCondition{{ConditionType: "APIServerHealthy", Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{"False"}}},
	RemoveOnConditions: []v1alpha1.MatchCondition{{ConditionType: "APIServerHealthy", Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{"True"}}},
	Taints:             []v1alpha1.PolicyTaint{{Key: "example.com/api-degraded", Effect: corev1.TaintEffectNoSchedule}},
}

// TestTaintFollowsConditions: a policy's taint comes with its
// addOnConditions and goes with its removeOnConditions, one write each,
// with events on the cluster and the policy and the owner recorded;
// operators' taints written meanwhile are kept, even when they conflict
// with the controller's write; deleting the policy leaves its taint.
func TestTaintFollowsConditions(t *testing.T) {
	f := newFixture(t, Options{HubNoExecute: true})
	f.cluster("member-1", map[string]metav1.ConditionStatus{"Ready": "True", "APIServerHealthy": "True"})
	f.cluster("member-2", map[string]metav1.ConditionStatus{"Ready": "True", "APIServerHealthy": "True"})
	f.policy("api-degraded", degraded)

	// An operator's taint lands between the controller's read and its
	// write: the write conflicts, and is made again over the latest version.
	f.mu.Lock()
	f.before = func() {
		f.addTaint("member-1", corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
	}
	f.mu.Unlock()
	f.setConditions("member-1", map[string]metav1.ConditionStatus{"APIServerHealthy": "False"})
	added := f.awaitTaints("member-1", []string{"example.com/maintenance:NoSchedule", "example.com/api-degraded:NoSchedule"},
		`{"example.com/api-degraded:NoSchedule":"api-degraded"}`)
	if at := added.Spec.Taints[1].TimeAdded; at == nil || !at.Time.Equal(f.T0) {
		t.Errorf("timeAdded = %v, want the controller's clock, %v", at, f.T0)
	}
	msg := "ClusterTaintPolicy api-degraded added taint example.com/api-degraded:NoSchedule to cluster member-1: its addOnConditions matched"
	f.AwaitEvents(0, "Normal TaintClusterSucceed Cluster member-1: "+msg, "Normal TaintClusterSucceed ClusterTaintPolicy api-degraded: "+msg)
	if got := f.writes.Load(); got != 2 {
		t.Errorf("cluster writes = %d, want 2 (one that conflicted, and its retry)", got)
	}
	f.awaitTaints("member-2", nil, "")

	// A change of another condition writes nothing.
	f.setConditions("member-1", map[string]metav1.ConditionStatus{"Ready": "False"})
	f.setConditions("member-1", map[string]metav1.ConditionStatus{"APIServerHealthy": "True"})
	f.awaitTaints("member-1", []string{"example.com/maintenance:NoSchedule"}, "")
	msg = "ClusterTaintPolicy api-degraded removed taint example.com/api-degraded:NoSchedule from cluster member-1: its removeOnConditions matched"
	f.AwaitEvents(2, "Normal TaintClusterSucceed Cluster member-1: "+msg, "Normal TaintClusterSucceed ClusterTaintPolicy api-degraded: "+msg)
	if got := f.writes.Load(); got != 3 {
		t.Errorf("cluster writes = %d, want 3", got)
	}

	// Deleted, the policy leaves its taint.
	f.setConditions("member-2", map[string]metav1.ConditionStatus{"APIServerHealthy": "False"})
	f.awaitTaints("member-2", []string{"example.com/api-degraded:NoSchedule"}, `{"example.com/api-degraded:NoSchedule":"api-degraded"}`)
	if err := f.Flotilla.ClusterTaintPolicies().Delete(t.Context(), "api-degraded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setConditions("member-2", map[string]metav1.ConditionStatus{"APIServerHealthy": "True"})
	// A marker policy's taint shows that the controller has seen member-2
	// since: the deleted policy's taint is still there.
	f.policy("marker", v1alpha1.ClusterTaintPolicySpec{
		AddOnConditions: []v1alpha1.MatchCondition{{ConditionType: "APIServerHealthy", Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{"True"}}},
		Taints:          []v1alpha1.PolicyTaint{{Key: "example.com/marker", Effect: corev1.TaintEffectPreferNoSchedule}},
	})
	f.awaitTaints("member-2", []string{"example.com/api-degraded:NoSchedule", "example.com/marker:PreferNoSchedule"},
		`{"example.com/api-degraded:NoSchedule":"api-degraded","example.com/marker:PreferNoSchedule":"marker"}`)
	// member-1 gets the marker too, in its own time.
	f.awaitTaints("member-1", []string{"example.com/maintenance:NoSchedule", "example.com/marker:PreferNoSchedule"},
		`{"example.com/marker:PreferNoSchedule":"marker"}`)
	// The observer runs after the write is seen, so its counts may lag.
	want := map[string]int{"api-degraded added": 2, "api-degraded removed": 1, "marker added": 2}
	var got map[string]int
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		got = maps.Clone(f.counts)
		return cmp.Equal(want, got), nil
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// TestNewPolicyTaintsMatchingClusters: a policy created or changed is
// applied to the clusters it targets at once, without a condition
// change; Karmada's key is written as Flotilla's.
func TestNewPolicyTaintsMatchingClusters(t *testing.T) {
	f := newFixture(t, Options{})
	f.cluster("member-1", map[string]metav1.ConditionStatus{"Ready": "False"})
	f.cluster("member-2", map[string]metav1.ConditionStatus{"Ready": "False"})
	spec := v1alpha1.ClusterTaintPolicySpec{
		TargetClusters:  &v1alpha1.ClusterAffinity{ClusterNames: []string{"member-1"}},
		AddOnConditions: []v1alpha1.MatchCondition{{ConditionType: "Ready", Operator: v1alpha1.MatchConditionOpNotIn, StatusValues: []metav1.ConditionStatus{"True"}}},
		Taints:          []v1alpha1.PolicyTaint{{Key: "cluster.karmada.io/not-ready", Effect: corev1.TaintEffectNoExecute}},
	}
	f.policy("not-ready", spec)
	f.awaitTaints("member-1", []string{"cluster.flotilla.io/not-ready:NoExecute"}, `{"cluster.flotilla.io/not-ready:NoExecute":"not-ready"}`)

	p, err := f.Flotilla.ClusterTaintPolicies().Get(t.Context(), "not-ready", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.TargetClusters = nil
	if _, err := f.Flotilla.ClusterTaintPolicies().Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.awaitTaints("member-2", []string{"cluster.flotilla.io/not-ready:NoExecute"}, `{"cluster.flotilla.io/not-ready:NoExecute":"not-ready"}`)
}

// TestHubOwnedTaintIsLeftAlone: while the hub sets the NoExecute health
// taints, a policy naming one is warned about and does not set it.
func TestHubOwnedTaintIsLeftAlone(t *testing.T) {
	f := newFixture(t, Options{HubNoExecute: true})
	f.cluster("member-1", map[string]metav1.ConditionStatus{"Ready": "False"})
	f.policy("not-ready", v1alpha1.ClusterTaintPolicySpec{
		AddOnConditions: []v1alpha1.MatchCondition{{ConditionType: "Ready", Operator: v1alpha1.MatchConditionOpNotIn, StatusValues: []metav1.ConditionStatus{"True"}}},
		Taints: []v1alpha1.PolicyTaint{{Key: "cluster.karmada.io/not-ready", Effect: corev1.TaintEffectNoExecute},
			{Key: "example.com/not-ready", Effect: corev1.TaintEffectNoSchedule}},
	})
	f.awaitTaints("member-1", []string{"example.com/not-ready:NoSchedule"}, `{"example.com/not-ready:NoSchedule":"not-ready"}`)
	if n := f.Events.Count("Warning HubOwnedTaint ClusterTaintPolicy not-ready: the hub sets cluster.flotilla.io/not-ready:NoExecute itself"); n != 1 {
		t.Errorf("HubOwnedTaint events = %d, want 1; events: %q", n, f.Events.List())
	}
}
