package store

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

var (
	clusterKind = Kind{Resource: "clusters", GVK: schema.GroupVersionKind{Group: v1alpha1.GroupName, Version: v1alpha1.Version, Kind: "Cluster"}}
	leaseKind   = Kind{Resource: "leases", GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Namespaced: true}
)

func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func cluster(name, region string) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{Region: region}}
}

func lease(name string, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v1alpha1.LeaseNamespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(seconds)},
	}
}

func TestCreateGetUpdateDelete(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	ctx := t.Context()

	created, err := clusters.Create(ctx, cluster("edge-1", "eu"))
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.CreationTimestamp.IsZero() || created.ResourceVersion == "" {
		t.Fatalf("create did not stamp uid, creation time and resourceVersion: %+v", created.ObjectMeta)
	}
	if created.APIVersion != "flotilla.io/v1alpha1" || created.Kind != "Cluster" {
		t.Errorf("TypeMeta = %+v", created.TypeMeta)
	}
	if _, err := clusters.Create(ctx, cluster("edge-1", "us")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: err = %v, want AlreadyExists", err)
	}

	got, err := clusters.Get(ctx, "", "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("get (-created +got):\n%s", diff)
	}

	stale, err := clusters.copy(got)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Region = "eu-west"
	updated, err := clusters.Update(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == created.ResourceVersion || updated.UID != created.UID {
		t.Errorf("update: rv %s -> %s, uid %s -> %s", created.ResourceVersion, updated.ResourceVersion, created.UID, updated.UID)
	}
	stale.Spec.Region = "us"
	if _, err := clusters.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update with stale resourceVersion: err = %v, want Conflict", err)
	}
	stale.ResourceVersion = ""
	if _, err := clusters.Update(ctx, stale); !apierrors.IsBadRequest(err) {
		t.Errorf("update without resourceVersion: err = %v, want BadRequest", err)
	}

	if err := clusters.Delete(ctx, "", "edge-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := clusters.Get(ctx, "", "edge-1"); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: err = %v, want NotFound", err)
	}
	if err := clusters.Delete(ctx, "", "edge-1"); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: err = %v, want NotFound", err)
	}
	if _, err := clusters.Update(ctx, updated); !apierrors.IsNotFound(err) {
		t.Errorf("update after delete: err = %v, want NotFound", err)
	}
}

func TestKeysAreValidated(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	leases := For[coordinationv1.Lease](s, leaseKind)
	ctx := t.Context()
	namespaced := cluster("x", "")
	namespaced.Namespace = "default"
	noNamespace := lease("x", 40)
	noNamespace.Namespace = ""
	for name, err := range map[string]error{
		"empty name":               firstErr(clusters.Create(ctx, cluster("", ""))),
		"namespace, cluster-scope": firstErr(clusters.Create(ctx, namespaced)),
		"namespaced, none given":   firstErr(leases.Create(ctx, noNamespace)),
	} {
		if !apierrors.IsBadRequest(err) {
			t.Errorf("%s: err = %v, want BadRequest", name, err)
		}
	}
}

func firstErr[T any](_ T, err error) error { return err }

func TestListIsSortedAndScopedByNamespace(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	leases := For[coordinationv1.Lease](s, leaseKind)
	ctx := t.Context()
	for _, name := range []string{"c", "a", "b"} {
		if _, err := leases.Create(ctx, lease(name, 40)); err != nil {
			t.Fatal(err)
		}
	}
	other := lease("z", 40)
	other.Namespace = "elsewhere"
	if _, err := leases.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	items, rev, err := leases.List(ctx, v1alpha1.LeaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names(items)); diff != "" {
		t.Errorf("list names (-want +got):\n%s", diff)
	}
	all, allRev, err := leases.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || allRev < rev {
		t.Errorf("list all: %d items at revision %d, want 4 at ≥ %d", len(all), allRev, rev)
	}
}

func names[PT interface{ GetName() string }](items []PT) []string {
	out := make([]string, len(items))
	for i, item := range items {
		out[i] = item.GetName()
	}
	return out
}

func TestPutBatchWritesManyAndKeepsIdentity(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	leases := For[coordinationv1.Lease](s, leaseKind)
	ctx := t.Context()
	batch := make([]*coordinationv1.Lease, 300) // more than one transaction
	for i := range batch {
		batch[i] = lease(fmt.Sprintf("cluster-%03d", i), 40)
	}
	if _, err := leases.PutBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	uid := batch[7].UID
	if uid == "" {
		t.Fatal("PutBatch did not stamp a uid in place")
	}
	batch[7].Spec.LeaseTransitions = ptr.To[int32](1)
	if _, err := leases.PutBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	items, _, err := leases.List(ctx, v1alpha1.LeaseNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(batch) {
		t.Fatalf("%d leases stored, want %d", len(items), len(batch))
	}
	if items[7].UID != uid || ptr.Deref(items[7].Spec.LeaseTransitions, 0) != 1 {
		t.Errorf("lease 7 = uid %s transitions %v, want uid %s transitions 1", items[7].UID, items[7].Spec.LeaseTransitions, uid)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(t.Context(), Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := For[v1alpha1.Cluster](first, clusterKind).Create(t.Context(), cluster("kept", "eu")); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openStore(t, Config{DataDir: dir})
	got, err := For[v1alpha1.Cluster](second, clusterKind).Get(t.Context(), "", "kept")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Region != "eu" {
		t.Errorf("region after restart = %q, want eu", got.Spec.Region)
	}
}

// TestExternalEndpoints reaches an etcd through endpoints, the HA path: here
// the embedded etcd of another store, through its client socket.
func TestExternalEndpoints(t *testing.T) {
	dir := t.TempDir()
	embedded := openStore(t, Config{DataDir: dir})
	if _, err := For[v1alpha1.Cluster](embedded, clusterKind).Create(t.Context(), cluster("shared", "eu")); err != nil {
		t.Fatal(err)
	}
	external := openStore(t, Config{Endpoints: []string{"unix://" + filepath.Join(dir, "etcd", "client.sock")}})
	if _, err := For[v1alpha1.Cluster](external, clusterKind).Get(t.Context(), "", "shared"); err != nil {
		t.Fatalf("external store does not see the embedded store's data: %v", err)
	}
}

func TestOpenRejectsMissingLocation(t *testing.T) {
	if _, err := Open(t.Context(), Config{}); err == nil {
		t.Fatal("Open with neither data dir nor endpoints succeeded")
	}
}

// eventSummary is an event without volatile fields, for comparisons.
type eventSummary struct {
	Type   EventType
	Name   string
	Region string
}

func nextEvents(t *testing.T, ch <-chan Event[*v1alpha1.Cluster], n int) []eventSummary {
	t.Helper()
	var got []eventSummary
	timeout := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if ev.Type == Error {
				t.Fatalf("watch error: %v", ev.Err)
			}
			got = append(got, eventSummary{ev.Type, ev.Object.Name, ev.Object.Spec.Region})
		case <-timeout:
			t.Fatalf("got %d of %d events: %v", len(got), n, got)
		}
	}
	return got
}

func sortEvents(events []eventSummary) []eventSummary {
	sort.Slice(events, func(i, j int) bool { return events[i].Name < events[j].Name })
	return events
}

func TestWatch(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	ctx := t.Context()
	first, err := clusters.Create(ctx, cluster("a", "eu"))
	if err != nil {
		t.Fatal(err)
	}
	_, rev, err := clusters.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	fromZero := clusters.Watch(ctx, "", 0)
	fromList := clusters.Watch(ctx, "", rev)
	if diff := cmp.Diff([]eventSummary{{Added, "a", "eu"}}, nextEvents(t, fromZero, 1)); diff != "" {
		t.Errorf("initial events (-want +got):\n%s", diff)
	}

	if _, err := clusters.Create(ctx, cluster("b", "us")); err != nil {
		t.Fatal(err)
	}
	first.Spec.Region = "eu-west"
	if _, err := clusters.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := clusters.Delete(ctx, "", "b"); err != nil {
		t.Fatal(err)
	}
	want := []eventSummary{{Added, "b", "us"}, {Modified, "a", "eu-west"}, {Deleted, "b", "us"}}
	for name, ch := range map[string]<-chan Event[*v1alpha1.Cluster]{"from 0": fromZero, "from list": fromList} {
		if diff := cmp.Diff(want, nextEvents(t, ch, 3)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", name, diff)
		}
	}
}

// TestWatchRecoversFromCompaction breaks a watch, changes and compacts the
// store while it is away, and checks that it delivers exactly the
// difference when it comes back.
func TestWatchRecoversFromCompaction(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	ctx := t.Context()
	for _, name := range []string{"keep", "change", "remove"} {
		if _, err := clusters.Create(ctx, cluster(name, "eu")); err != nil {
			t.Fatal(err)
		}
	}
	watch := clusters.Watch(ctx, "", 0)
	nextEvents(t, watch, 3)

	resume := make(chan struct{})
	clusters.pause <- resume
	change, err := clusters.Get(ctx, "", "change")
	if err != nil {
		t.Fatal(err)
	}
	change.Spec.Region = "us"
	if _, err := clusters.Update(ctx, change); err != nil {
		t.Fatal(err)
	}
	if err := clusters.Delete(ctx, "", "remove"); err != nil {
		t.Fatal(err)
	}
	if _, err := clusters.Create(ctx, cluster("new", "ap")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	close(resume)

	want := []eventSummary{{Modified, "change", "us"}, {Added, "new", "ap"}, {Deleted, "remove", "eu"}}
	if diff := cmp.Diff(want, sortEvents(nextEvents(t, watch, 3))); diff != "" {
		t.Errorf("events after compaction (-want +got):\n%s", diff)
	}
	// And it keeps following afterwards.
	if _, err := clusters.Create(ctx, cluster("later", "eu")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eventSummary{{Added, "later", "eu"}}, nextEvents(t, watch, 1)); diff != "" {
		t.Errorf("event after recovery (-want +got):\n%s", diff)
	}
}

func TestWatchFromCompactedRevisionIsGone(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	ctx := t.Context()
	if _, err := clusters.Create(ctx, cluster("a", "eu")); err != nil {
		t.Fatal(err)
	}
	_, rev, err := clusters.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := clusters.Delete(ctx, "", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	ev := <-clusters.Watch(ctx, "", rev)
	if ev.Type != Error || !apierrors.IsResourceExpired(ev.Err) {
		t.Fatalf("first event = %+v, want an Error event with an Expired (410) error", ev)
	}
}
