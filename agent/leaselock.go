package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/flotilla-io/flotilla/agent/ownerref"
	"github.com/flotilla-io/flotilla/agent/work"
)

// ownedLeaseLock is the election's Lease lock: client-go's LeaseLock, but
// the Lease it creates carries the agent's label and its owner, and a
// renewal adds the owner to a Lease that lacks it (one made by an agent
// that ran without an owner), so that removing the installation removes
// the Lease too. client-go's lock cannot set owners.
type ownedLeaseLock struct {
	client          coordinationv1client.LeasesGetter
	namespace, name string
	identity        string
	owner           *ownerref.Owner
	// lease is the Lease last read or written; Update writes over it.
	lease *coordinationv1.Lease
}

var _ resourcelock.Interface = (*ownedLeaseLock)(nil)

// Get reads the Lease and its election record.
func (l *ownedLeaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.lease = lease
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*record)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the election record of Lease %s: %w", l.Describe(), err)
	}
	return record, raw, nil
}

// Create makes the Lease with record, owned by the owner.
func (l *ownedLeaseLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: l.name,
			Labels:          map[string]string{work.LabelManagedBy: work.ManagedBy},
			OwnerReferences: ownerref.With(nil, l.owner.Ref(ctx))},
		Spec: resourcelock.LeaderElectionRecordToLeaseSpec(&record),
	}
	created, err := l.client.Leases(l.namespace).Create(ctx, lease, metav1.CreateOptions{FieldManager: work.FieldManager})
	if err != nil {
		return err
	}
	l.lease = created
	return nil
}

// Update writes record over the Lease last read, adding the owner if it
// lacks it.
func (l *ownedLeaseLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	l.lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&record)
	l.lease.OwnerReferences = ownerref.With(l.lease.OwnerReferences, l.owner.Ref(ctx))
	updated, err := l.client.Leases(l.namespace).Update(ctx, l.lease, metav1.UpdateOptions{FieldManager: work.FieldManager})
	if err != nil {
		return err
	}
	l.lease = updated
	return nil
}

// RecordEvent records nothing: the agent logs its election instead.
func (l *ownedLeaseLock) RecordEvent(string) {}

// Describe names the Lease.
func (l *ownedLeaseLock) Describe() string { return l.namespace + "/" + l.name }

// Identity is this replica's identity.
func (l *ownedLeaseLock) Identity() string { return l.identity }
