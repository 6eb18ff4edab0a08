package store

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// MaxTxnObjects is the most objects one Txn may write. The embedded etcd
// is configured for it; an external etcd needs --max-txn-ops at least this.
const MaxTxnObjects = 1024

// Txn collects creates, updates and deletes of objects of any kinds and
// commits them in one etcd transaction: all happen, or none.
type Txn struct {
	s    *Store
	cmps []clientv3.Cmp
	ops  []clientv3.Op
	// conflictOn names the objects whose comparisons guard the transaction,
	// in the order of cmps, for the Conflict error.
	conflictOn []schema.GroupResource
	names      []string
	err        error
}

// NewTxn starts an empty transaction.
func (s *Store) NewTxn() *Txn { return &Txn{s: s} }

// Len is the number of writes collected.
func (t *Txn) Len() int { return len(t.ops) }

func (t *Txn) add(gr schema.GroupResource, name string, cmp clientv3.Cmp, op clientv3.Op) {
	t.cmps = append(t.cmps, cmp)
	t.ops = append(t.ops, op)
	t.conflictOn = append(t.conflictOn, gr)
	t.names = append(t.names, name)
}

// Commit writes everything, or nothing: Conflict if any object changed (or
// appeared, for a create) since the caller read it. It returns the
// revision of the write.
func (t *Txn) Commit(ctx context.Context) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	if len(t.ops) > MaxTxnObjects {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("%d objects in one transaction, limit %d", len(t.ops), MaxTxnObjects))
	}
	if len(t.ops) == 0 {
		return 0, nil
	}
	resp, err := t.s.client.Txn(ctx).If(t.cmps...).Then(t.ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("commit %d writes: %w", len(t.ops), err)
	}
	if !resp.Succeeded {
		return 0, apierrors.NewConflict(t.conflictOn[0], t.names[0],
			fmt.Errorf("one of %d objects was modified meanwhile; read them again and retry", len(t.ops)))
	}
	return resp.Header.Revision, nil
}

// TxnCreate adds the creation of obj to t (a uid and creation time are
// stamped on obj); the commit fails with Conflict if the name is taken.
func (r *Resource[T, PT]) TxnCreate(t *Txn, obj PT) {
	key, err := r.key(obj.GetNamespace(), obj.GetName())
	if err != nil {
		t.fail(err)
		return
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(r.store.clock.Now()))
	value, err := r.encode(obj)
	if err != nil {
		t.fail(err)
		return
	}
	t.add(r.groupResource(), obj.GetName(), clientv3.Compare(clientv3.CreateRevision(key), "=", 0), clientv3.OpPut(key, value))
}

// TxnUpdate adds the update of obj to t; the commit fails with Conflict if
// the stored object's resourceVersion is no longer obj's. The caller keeps
// uid and creation time (it read them).
func (r *Resource[T, PT]) TxnUpdate(t *Txn, obj PT) {
	key, rv, ok := r.txnTarget(t, obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion())
	if !ok {
		return
	}
	value, err := r.encode(obj)
	if err != nil {
		t.fail(err)
		return
	}
	t.add(r.groupResource(), obj.GetName(), clientv3.Compare(clientv3.ModRevision(key), "=", rv), clientv3.OpPut(key, value))
}

// TxnDelete adds the deletion of an object at resourceVersion to t.
func (r *Resource[T, PT]) TxnDelete(t *Txn, namespace, name, resourceVersion string) {
	key, rv, ok := r.txnTarget(t, namespace, name, resourceVersion)
	if !ok {
		return
	}
	t.add(r.groupResource(), name, clientv3.Compare(clientv3.ModRevision(key), "=", rv), clientv3.OpDelete(key))
}

func (r *Resource[T, PT]) txnTarget(t *Txn, namespace, name, resourceVersion string) (string, int64, bool) {
	key, err := r.key(namespace, name)
	if err != nil {
		t.fail(err)
		return "", 0, false
	}
	rv, err := strconv.ParseInt(resourceVersion, 10, 64)
	if err != nil || rv <= 0 {
		t.fail(apierrors.NewBadRequest(fmt.Sprintf("%s %q: metadata.resourceVersion %q is not a stored version", r.kind.Resource, name, resourceVersion)))
		return "", 0, false
	}
	return key, rv, true
}

func (t *Txn) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}
