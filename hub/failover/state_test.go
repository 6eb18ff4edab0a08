package failover

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/hub/names"
)

// stateFixture is a failover fixture with two clusters that have
// execution namespaces, a Ready and b, and the binding web-deployment of
// one replica on a, with cluster failover purgeMode Directly and a state
// preservation rule reading updateRevision.
type stateFixture struct {
	*fixture
	clk  *clocktesting.FakeClock
	a, b string
	key  string
}

func newStateFixture(t *testing.T) *stateFixture {
	t.Helper()
	f := &stateFixture{fixture: newFixture(t)}
	f.clk = clocktesting.NewFakeClock(f.T0)
	f.a, f.b = f.twoReadyClusters("state-")
	b := f.CreateDeploymentBinding("web", v1alpha1.ResourceBindingSpec{
		Replicas: 1,
		Clusters: []v1alpha1.TargetCluster{{Name: f.a, Replicas: 1}},
		Failover: &v1alpha1.FailoverBehavior{Cluster: &v1alpha1.ClusterFailoverBehavior{
			PurgeMode: v1alpha1.PurgeModeDirectly,
			StatePreservation: &v1alpha1.StatePreservation{Rules: []v1alpha1.StatePreservationRule{
				{AliasLabelName: "example.com/revision", JSONPath: "{.updateRevision}"},
			}},
		}},
	})
	f.EditBindingStatus(b.Name, f.scheduled)
	f.key = controller.Key(f.Namespace, "web-deployment")
	return f
}

// work writes the binding's Work in cluster, with status as its agent's
// last report ("" for none).
func (f *stateFixture) work(cluster, status string) {
	f.T.Helper()
	ctx := f.T.Context()
	works := f.Flotilla.Works(v1alpha1.ExecutionNamespace(cluster))
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: names.WorkName(f.key, "web-deployment"),
		Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: f.key, v1alpha1.AnnotationWorkReplicas: "1"}}}
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`)}}}
	w, err := works.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	if status == "" {
		return
	}
	w.Status.ObservedGeneration = w.Generation
	w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonAppliedSuccessful, LastTransitionTime: metav1.NewTime(f.T0)}}
	w.Status.ManifestStatuses = []v1alpha1.ManifestStatus{{Health: v1alpha1.HealthHealthy, Status: &runtime.RawExtension{Raw: []byte(status)}}}
	if _, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// lease writes cluster's Lease as last renewed at renewed.
func (f *stateFixture) lease(cluster string, renewed time.Time) {
	f.T.Helper()
	ctx := f.T.Context()
	_, err := f.Env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.LeaseNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.T.Fatal(err)
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: v1alpha1.LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(cluster), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: renewed}}}
	if _, err := f.Env.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
	f.T.Cleanup(func() {
		_ = f.Env.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).Delete(f.T.Context(), cluster, metav1.DeleteOptions{})
	})
}

func (f *stateFixture) start() {
	f.T.Helper()
	f.fixture.start(f.clk, testConfig(), 1)
}

// TestEvictionPreservesState: the state the rules read from the failed
// cluster's last reported status goes into the eviction task, with the
// clusters before the failover and how recent that status is; a cluster
// that never reported, or reported a value no label can hold, is left
// without state, and a warning says why.
func TestEvictionPreservesState(t *testing.T) {
	t0Unknown := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	unknown := metav1.Condition{Type: v1alpha1.ClusterConditionReady, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonLeaseExpired, LastTransitionTime: metav1.NewTime(t0Unknown)}
	tests := []struct {
		name        string
		status      string // the agent's last report; "" for none
		unreachable bool   // lease renewed 5 minutes before the eviction
		wantLabels  map[string]string
		wantMessage string // in the task's message and the Evicted event
		wantWarning string // a StateNotPreserved event containing it
	}{
		{"reachable", `{"updateRevision": "web-7d4b9"}`, false, map[string]string{"example.com/revision": "web-7d4b9"},
			"; state preserved from the status its agent reports", ""},
		{"unreachable: the last status the hub holds, and its age", `{"updateRevision": "web-7d4b9"}`, true, map[string]string{"example.com/revision": "web-7d4b9"},
			"is unreachable, the hub last heard from its agent 5m0s before the eviction", ""},
		{"never reported", "", true, nil,
			"never reported the workload's status", "never reported the workload's status; the new copy gets no preserved labels"},
		{"not a label value", `{"updateRevision": "a b"}`, false, nil,
			"state not preserved: rule example.com/revision: value \"a b\" is not a valid label value", "is not a valid label value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStateFixture(t)
			f.work(f.a, tt.status)
			heard := f.T0.Add(-5 * time.Minute)
			if tt.unreachable {
				f.lease(f.a, heard)
			}
			f.start()
			if tt.unreachable {
				f.SetConditions(f.a, unknown)
			}
			f.setCluster(f.b, true, f.T0.Add(-time.Hour))
			f.SetTaints(f.a, broken)
			b := f.AwaitBinding("web-deployment", "evicted from a", evictedFrom(f.a))
			task := b.Spec.GracefulEvictionTasks[0]
			if diff := cmp.Diff(tt.wantLabels, task.PreservedLabelState); diff != "" {
				t.Errorf("preserved labels (-want +got):\n%s", diff)
			}
			if !strings.Contains(task.Message, tt.wantMessage) {
				t.Errorf("task message %q, want it to contain %q", task.Message, tt.wantMessage)
			}
			if tt.wantLabels != nil {
				if diff := cmp.Diff([]string{f.a}, task.ClustersBeforeFailover); diff != "" {
					t.Errorf("clusters before failover (-want +got):\n%s", diff)
				}
				want := f.T0
				if tt.unreachable {
					want = heard
				}
				if task.PreservedStateObservedAt == nil || !task.PreservedStateObservedAt.Time.Equal(want) {
					t.Errorf("state observed at %v, want %v", task.PreservedStateObservedAt, want)
				}
			}
			// The observer hears the eviction after its events and
			// warnings are recorded: then they are all there.
			poll(t, "the observer to hear the eviction", func() (bool, string) {
				evicted, _, _ := f.heard.snapshot()
				return len(evicted) == 1, fmt.Sprintf("evictions heard %v", evicted)
			})
			if n := f.Events.Count("Warning Evicted ResourceBinding"); n != 1 {
				t.Errorf("%d Evicted events, want 1", n)
			}
			warnings := slices.DeleteFunc(f.Events.List(), func(e string) bool {
				return !strings.HasPrefix(e, "Warning "+ReasonStateNotPreserved+" ResourceBinding")
			})
			switch {
			case tt.wantWarning == "" && len(warnings) > 0:
				t.Errorf("warnings %q, want none", warnings)
			case tt.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tt.wantWarning)):
				t.Errorf("warnings %q, want one containing %q", warnings, tt.wantWarning)
			}
			var wantLost []string // the observer's reasons, for the metrics
			switch {
			case tt.wantWarning != "" && tt.status == "":
				wantLost = []string{StateStatusNotCollected}
			case tt.wantWarning != "":
				wantLost = []string{StateRuleFailed}
			}
			f.heard.mu.Lock()
			lost := slices.Clone(f.heard.stateLost)
			f.heard.mu.Unlock()
			if diff := cmp.Diff(wantLost, lost); diff != "" {
				t.Errorf("state not preserved, as the observer heard (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDirectlyTaskWaitsForTheOldCopy: a Directly task whose grace period
// is over lives on while the old Work is there (its replacement waits for
// it), and ends once the Work is gone.
func TestDirectlyTaskWaitsForTheOldCopy(t *testing.T) {
	f := newStateFixture(t)
	f.work(f.a, `{"updateRevision": "web-7d4b9"}`)
	f.start()
	f.SetTaints(f.a, broken)
	f.AwaitBinding("web-deployment", "evicted from a", evictedFrom(f.a))
	f.place("web-deployment", v1alpha1.TargetCluster{Name: f.b, Replicas: 1})
	placed := f.AwaitBinding("web-deployment", "placed on b", func(b *v1alpha1.ResourceBinding) bool {
		return b.Status.SchedulerObservedGeneration == b.Generation && len(b.Spec.Clusters) == 1
	})
	// Once the controller's informer has the placement, a reconcile keeps
	// the task, whose grace period (0 here) is over.
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, controllertest.WaitTimeout, true, func(context.Context) (bool, error) {
		b := f.ctl.bindings.Get(f.key)
		return b != nil && b.ResourceVersion == placed.ResourceVersion, nil
	})
	if err != nil {
		t.Fatalf("the informer never had the placement: %v", err)
	}
	if err := f.ctl.reconcile(t.Context(), f.key); err != nil {
		t.Fatal(err)
	}
	spec, _ := f.BindingSpec(f.Namespace, "web-deployment")
	if len(spec.GracefulEvictionTasks) != 1 {
		t.Fatalf("tasks %+v, want the Directly task kept while its old Work is there", spec.GracefulEvictionTasks)
	}

	works := f.Flotilla.Works(v1alpha1.ExecutionNamespace(f.a))
	if err := works.Delete(t.Context(), names.WorkName(f.key, "web-deployment"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.AwaitBinding("web-deployment", "task ended", noTasks)
	ended := fmt.Sprintf("eviction from %s ended (GracePeriodExpired); its copy was removed when it was evicted", f.a)
	f.AwaitBinding("web-deployment", "EvictionTaskEnded event", func(*v1alpha1.ResourceBinding) bool {
		return f.Events.Count("Normal EvictionTaskEnded ResourceBinding web-deployment: "+ended) == 1
	})
}
