package agent

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/agent/ownerref"
	"github.com/flotilla-io/flotilla/agent/work"
)

// TestOwnedLeaseLock: the election's Lease is created owned by the owner
// ServiceAccount (if any), and a renewal adds the owner to a Lease that
// lacks it, keeping its other owners.
func TestOwnedLeaseLock(t *testing.T) {
	const ns, name = "flotilla-system", "flotilla-agent"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-sa", UID: "sa-uid"}}
	owned := metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: "agent-sa", UID: "sa-uid", BlockOwnerDeletion: ptr.To(false)}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other-uid"}
	tests := []struct {
		name     string
		existing []metav1.OwnerReference // owners of an existing Lease; nil: none exists
		exists   bool
		owner    string // the owner ServiceAccount's name; "": no owner
		want     []metav1.OwnerReference
	}{
		{name: "created, owned", owner: "agent-sa", want: []metav1.OwnerReference{owned}},
		{name: "created, no owner", want: nil},
		{name: "created, owner missing", owner: "missing-sa", want: nil},
		{name: "renewed, owner added", exists: true, owner: "agent-sa", want: []metav1.OwnerReference{owned}},
		{name: "renewed, owner added beside another", exists: true, existing: []metav1.OwnerReference{other}, owner: "agent-sa",
			want: []metav1.OwnerReference{other, owned}},
		{name: "renewed, owned already", exists: true, existing: []metav1.OwnerReference{owned}, owner: "agent-sa",
			want: []metav1.OwnerReference{owned}},
		{name: "renewed, no owner: left alone", exists: true, existing: []metav1.OwnerReference{other}, want: []metav1.OwnerReference{other}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(sa)
			if tc.exists {
				lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: tc.existing}}
				if _, err := client.CoordinationV1().Leases(ns).Create(t.Context(), lease, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			owner := ownerref.New(client, ns, tc.owner, slog.New(slog.DiscardHandler), clocktesting.NewFakePassiveClock(time.Now()))
			lock := &ownedLeaseLock{client: client.CoordinationV1(), namespace: ns, name: name, identity: "pod-a_1234", owner: owner}
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			record := resourcelock.LeaderElectionRecord{HolderIdentity: lock.Identity(), LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
			if tc.exists {
				if _, _, err := lock.Get(t.Context()); err != nil {
					t.Fatalf("Get: %v", err)
				}
				if err := lock.Update(t.Context(), record); err != nil {
					t.Fatalf("Update: %v", err)
				}
			} else if err := lock.Create(t.Context(), record); err != nil {
				t.Fatalf("Create: %v", err)
			}

			lease, err := client.CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lease.OwnerReferences); diff != "" {
				t.Errorf("owners of the Lease (-want +got):\n%s", diff)
			}
			if !tc.exists && lease.Labels[work.LabelManagedBy] != work.ManagedBy {
				t.Errorf("labels of the created Lease %v, want it managed by the agent", lease.Labels)
			}
			got, _, err := lock.Get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&record, got); diff != "" {
				t.Errorf("election record read back (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOwnedLeaseLockUpdateFirst: an Update before any Get or Create fails
// as client-go's lock does, so the elector falls back to reading.
func TestOwnedLeaseLockUpdateFirst(t *testing.T) {
	lock := &ownedLeaseLock{client: fake.NewClientset().CoordinationV1(), namespace: "ns", name: "lease"}
	if err := lock.Update(t.Context(), resourcelock.LeaderElectionRecord{}); err == nil {
		t.Error("Update before Get = nil, want an error")
	}
}
