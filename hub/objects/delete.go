package objects

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-io/flotilla/store"
)

// Delete removes every item (identified by apiVersion, kind, namespace and
// name; the rest is ignored) in one transaction. Items that do not exist
// are reported "not found" and do not fail the request.
func (o *Objects) Delete(ctx context.Context, raw []json.RawMessage, defaultNamespace string) ([]Outcome, error) {
	items, err := o.decode(ctx, raw, defaultNamespace, true)
	if err != nil {
		return nil, err
	}
	return o.commit(ctx, items, o.stageDelete, false)
}

func (o *Objects) stageDelete(ctx context.Context, txn *store.Txn, it *item) (string, error) {
	m := it.meta()
	switch {
	case it.policy != nil:
		return stageDeleteTyped(ctx, txn, o.Policies, m.GetNamespace(), m.GetName())
	case it.clusterPolicy != nil:
		return stageDeleteTyped(ctx, txn, o.ClusterPolicies, "", m.GetName())
	case it.rebalancer != nil:
		return stageDeleteTyped(ctx, txn, o.Rebalancers, "", m.GetName())
	}
	r := o.Template(it.template.GroupVersionKind().GroupKind(), it.namespaced)
	return stageDeleteTyped(ctx, txn, r, m.GetNamespace(), m.GetName())
}

func stageDeleteTyped[T any, PT store.Object[T]](ctx context.Context, txn *store.Txn, r *store.Resource[T, PT], namespace, name string) (string, error) {
	stored, err := r.Get(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return ActionNotFound, nil
	case err != nil:
		return "", err
	}
	r.TxnDelete(txn, namespace, name, stored.GetResourceVersion())
	return ActionDeleted, nil
}
