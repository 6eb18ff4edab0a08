package binding_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// stateful is a policy placing nginx on one cluster, member1 or member2, leaving a failed cluster with purgeMode Directly and keeping
// its updateRevision.
const stateful = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling: {replicaSchedulingType: Duplicated}
    spreadConstraints: [{spreadByField: cluster, minGroups: 1, maxGroups: 1}]
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules: [{aliasLabelName: example.com/revision, jsonPath: "{.updateRevision}"}]`

// evict does the failover controller's part: the binding leaves from,
// with a Directly task carrying the preserved state.
func (p *pipeline) evict(key, from string) {
	p.tb.Helper()
	_, name, _ := strings.Cut(key, "/")
	bindings := p.env.Flotilla.FlotillaV1alpha1().ResourceBindings(p.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := bindings.Get(p.tb.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Spec.Clusters = slices.DeleteFunc(b.Spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == from })
		b.Spec.GracefulEvictionTasks = append(b.Spec.GracefulEvictionTasks, v1alpha1.GracefulEvictionTask{
			FromCluster: from, PurgeMode: v1alpha1.PurgeModeDirectly, Reason: "TaintUntolerated", Producer: "TaintManager",
			CreationTimestamp: &metav1.Time{Time: time.Now()}, PreservedLabelState: map[string]string{"example.com/revision": "nginx-7d4b9"},
			ClustersBeforeFailover: []string{from},
		})
		_, err = bindings.Update(p.tb.Context(), b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		p.tb.Fatal(err)
	}
}

// labelsIn reads the labels of a Work's manifest.
func labelsIn(t testing.TB, w *v1alpha1.Work) map[string]string {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		t.Fatal(err)
	}
	return u.GetLabels()
}

// TestDirectlyDeletesTheOldCopyFirst: with purgeMode Directly the old
// copy's Work is deleted and the new cluster's is created only once the
// agent confirmed the deletion (the Work is gone); the new copy carries
// the preserved labels.
func TestDirectlyDeletesTheOldCopyFirst(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	key := p.bindingKey("nginx", "Deployment")
	p.apply(nginx, stateful)
	p.awaitWorks(key, map[string]int64{"member1": 3})
	old := p.awaitWork(key, "member1", "rendered", func(*v1alpha1.Work) bool { return true })

	p.evict(key, "member1")
	// The reconcile that deletes the old Work renders the others first:
	// once the deletion shows, no new Work was made.
	p.awaitWorks(key, map[string]int64{}, "member1")
	if _, ok := labelsIn(t, old)["example.com/revision"]; ok {
		t.Errorf("the old copy has the preserved label: %v", labelsIn(t, old))
	}
	// The reconcile that deleted the old Work noted the wait first.
	if waiting, waited := p.waits.snapshot(); !slices.Equal(waiting, []int{1}) || len(waited) > 0 {
		t.Errorf("observer heard waiting %v waited %v, want one binding waiting", waiting, waited)
	}

	// The agent confirms: the dispatcher removes the finalizer.
	works := p.env.Flotilla.FlotillaV1alpha1().Works(old.Namespace)
	if _, err := works.Patch(t.Context(), old.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	created := p.awaitWorks(key, map[string]int64{"member2": 3})["member2"]
	if got := labelsIn(t, created); got["example.com/revision"] != "nginx-7d4b9" || got["app"] != "" && got["app"] != "nginx" {
		t.Errorf("new copy's labels %v, want example.com/revision=nginx-7d4b9", got)
	}
	// The wait ended before the new Work was written.
	if waiting, waited := p.waits.snapshot(); !slices.Equal(waiting, []int{1, 0}) || len(waited) != 1 || waited[0] <= 0 {
		t.Errorf("observer heard waiting %v waited %v, want 1 then 0 and one wait", waiting, waited)
	}
}

// TestDirectlyGoesOnOnceFencingStoppedTheOldCopy: an old copy whose agent
// has been cut off longer than its fencing allows (plus the margin) counts
// as stopped: the new copy is made while the old Work waits for its agent.
func TestDirectlyGoesOnOnceFencingStoppedTheOldCopy(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	key := p.bindingKey("nginx", "Deployment")
	p.apply(nginx, stateful+"\n      fencing: {stopAfterSeconds: 60}")
	old := p.awaitWork(key, "member1", "fencing", func(w *v1alpha1.Work) bool { return w.Spec.Fencing != nil })
	// The agent applied it, and was last heard from an hour ago.
	old.Status.ObservedGeneration = old.Generation
	if _, err := p.env.Flotilla.FlotillaV1alpha1().Works(old.Namespace).UpdateStatus(t.Context(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.lease("member1", time.Now().Add(-time.Hour))

	p.evict(key, "member1")
	created := p.awaitWorks(key, map[string]int64{"member2": 3}, "member1")["member2"]
	if got := labelsIn(t, created)["example.com/revision"]; got != "nginx-7d4b9" {
		t.Errorf("new copy's label example.com/revision=%q, want nginx-7d4b9", got)
	}
}

// lease writes cluster's Lease as last renewed at renewed.
func (p *pipeline) lease(cluster string, renewed time.Time) {
	p.tb.Helper()
	ctx := p.tb.Context()
	_, err := p.env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.LeaseNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		p.tb.Fatal(err)
	}
	leases := p.env.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace)
	_ = leases.Delete(ctx, cluster, metav1.DeleteOptions{})
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: v1alpha1.LeaseNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(cluster), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: renewed}}}
	if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
		p.tb.Fatal(err)
	}
	p.tb.Cleanup(func() { _ = leases.Delete(context.Background(), cluster, metav1.DeleteOptions{}) })
}

// TestDirectlyGoesOnOnceTheClusterIsDeleted: an operator who deletes the
// failed cluster gives its copy up: the new copy is made.
func TestDirectlyGoesOnOnceTheClusterIsDeleted(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	key := p.bindingKey("nginx", "Deployment")
	p.apply(nginx, stateful)
	p.awaitWorks(key, map[string]int64{"member1": 3})
	p.evict(key, "member1")
	p.awaitWorks(key, map[string]int64{}, "member1")

	clusters := p.env.Flotilla.FlotillaV1alpha1().Clusters()
	if err := clusters.Delete(t.Context(), "member1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, err := clusters.Create(context.Background(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member1"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Error(err)
		}
	})
	p.awaitWorks(key, map[string]int64{"member2": 3}, "member1")
}
