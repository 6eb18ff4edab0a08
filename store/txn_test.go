package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestTxnWritesAllOrNothing(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	ctx := t.Context()
	clusters := For[v1alpha1.Cluster](s, clusterKind)
	leases := For[coordinationv1.Lease](s, leaseKind)
	existing, err := clusters.Create(ctx, cluster("edge-1", "eu"))
	if err != nil {
		t.Fatal(err)
	}

	txn := s.NewTxn()
	clusters.TxnCreate(txn, cluster("edge-2", "us"))
	leases.TxnCreate(txn, lease("edge-2", 40))
	existing.Spec.Region = "ap"
	clusters.TxnUpdate(txn, existing)
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := clusters.Get(ctx, "", "edge-1")
	if err != nil || got.Spec.Region != "ap" {
		t.Fatalf("edge-1 after commit: %v, %v", got, err)
	}
	if _, err := leases.Get(ctx, "flotilla-cluster-lease", "edge-2"); err != nil {
		t.Fatalf("lease created in the txn: %v", err)
	}

	// existing is now stale: a second transaction fails as a whole.
	txn = s.NewTxn()
	clusters.TxnCreate(txn, cluster("edge-3", "us"))
	clusters.TxnUpdate(txn, existing)
	if _, err := txn.Commit(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: err = %v, want Conflict", err)
	}
	if _, err := clusters.Get(ctx, "", "edge-3"); !apierrors.IsNotFound(err) {
		t.Errorf("edge-3 was created by a failed transaction: %v", err)
	}

	txn = s.NewTxn()
	clusters.TxnDelete(txn, "", "edge-1", got.ResourceVersion)
	clusters.TxnCreate(txn, cluster("edge-2", "us")) // taken
	if _, err := txn.Commit(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("create of a taken name: err = %v, want Conflict", err)
	}
	if _, err := clusters.Get(ctx, "", "edge-1"); err != nil {
		t.Errorf("edge-1 was deleted by a failed transaction: %v", err)
	}
	txn = s.NewTxn()
	clusters.TxnDelete(txn, "", "edge-1", "")
	if _, err := txn.Commit(ctx); !apierrors.IsBadRequest(err) {
		t.Errorf("delete without version: err = %v, want BadRequest", err)
	}
}

func TestMixedKindKeepsEachObjectsKind(t *testing.T) {
	s := openStore(t, Config{DataDir: t.TempDir()})
	ctx := t.Context()
	deployments := For[unstructured.Unstructured](s, Kind{Resource: "resources/apps/Deployment", Namespaced: true})
	configMaps := For[unstructured.Unstructured](s, Kind{Resource: "resources/core/ConfigMap", Namespaced: true})
	all := For[unstructured.Unstructured](s, Kind{Resource: "resources"})
	mk := func(apiVersion, kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace("default")
		u.SetName(name)
		return u
	}
	if _, err := deployments.Create(ctx, mk("apps/v1", "Deployment", "nginx")); err != nil {
		t.Fatal(err)
	}
	if _, err := configMaps.Create(ctx, mk("v1", "ConfigMap", "nginx")); err != nil {
		t.Fatal(err)
	}
	items, _, err := all.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range items {
		got = append(got, u.GetAPIVersion()+" "+u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
	}
	want := []string{"apps/v1 Deployment default/nginx", "v1 ConfigMap default/nginx"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mixed list (-want +got):\n%s", diff)
	}
}
