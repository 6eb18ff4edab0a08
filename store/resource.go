package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Object is a pointer to a Kubernetes-shaped object: ObjectMeta for names and
// versions, TypeMeta for apiVersion and kind.
type Object[T any] interface {
	*T
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// Kind describes one kind of object in the store.
type Kind struct {
	// Resource is the plural lower-case name, e.g. "clusters"; it is part of
	// every key. It may contain slashes, to nest kinds under a common prefix.
	Resource string
	// GVK is stamped on every object of the kind. A zero GVK keeps each
	// object's own apiVersion and kind, for stores of mixed kinds (resource
	// templates).
	GVK        schema.GroupVersionKind
	Namespaced bool
}

// maxTxnOps is etcd's default limit of operations in one transaction.
const maxTxnOps = 128

// Resource is the typed store of one kind.
type Resource[T any, PT Object[T]] struct {
	store *Store
	kind  Kind
	// pause breaks a running watch until the received channel closes, so
	// tests can change and compact the store while a watcher is away.
	pause chan (<-chan struct{})
}

// For returns the typed store of one kind.
func For[T any, PT Object[T]](s *Store, kind Kind) *Resource[T, PT] {
	return &Resource[T, PT]{store: s, kind: kind, pause: make(chan (<-chan struct{}))}
}

func (r *Resource[T, PT]) groupResource() schema.GroupResource {
	return r.kind.GroupResource()
}

// prefixFor is the key prefix of a namespace ("" for all namespaces, or for
// cluster-scoped kinds).
func (r *Resource[T, PT]) prefixFor(namespace string) string {
	p := r.store.prefix + "/" + r.kind.Resource + "/"
	if r.kind.Namespaced && namespace != "" {
		p += namespace + "/"
	}
	return p
}

func (r *Resource[T, PT]) key(namespace, name string) (string, error) {
	if name == "" {
		return "", apierrors.NewBadRequest(fmt.Sprintf("%s: name is required", r.kind.Resource))
	}
	if r.kind.Namespaced && namespace == "" {
		return "", apierrors.NewBadRequest(fmt.Sprintf("%s %q: namespace is required", r.kind.Resource, name))
	}
	if !r.kind.Namespaced && namespace != "" {
		return "", apierrors.NewBadRequest(fmt.Sprintf("%s %q: kind is cluster-scoped, namespace %q not allowed", r.kind.Resource, name, namespace))
	}
	return r.prefixFor(namespace) + name, nil
}

// encode stores everything but the resourceVersion, which is etcd's own.
func (r *Resource[T, PT]) encode(obj PT) (string, error) {
	clone, err := r.copy(obj)
	if err != nil {
		return "", err
	}
	clone.SetResourceVersion("")
	r.stampKind(clone)
	data, err := json.Marshal(clone)
	if err != nil {
		return "", fmt.Errorf("encode %s %q: %w", r.kind.Resource, obj.GetName(), err)
	}
	return string(data), nil
}

func (r *Resource[T, PT]) decode(value []byte, modRevision int64) (PT, error) {
	obj := PT(new(T))
	if err := json.Unmarshal(value, obj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", r.kind.Resource, err)
	}
	obj.SetResourceVersion(strconv.FormatInt(modRevision, 10))
	r.stampKind(obj)
	return obj, nil
}

func (r *Resource[T, PT]) stampKind(obj PT) {
	if !r.kind.GVK.Empty() {
		obj.GetObjectKind().SetGroupVersionKind(r.kind.GVK)
	}
}

// copy deep-copies through JSON, so callers never share memory with the store.
func (r *Resource[T, PT]) copy(obj PT) (PT, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("copy %s %q: %w", r.kind.Resource, obj.GetName(), err)
	}
	clone := PT(new(T))
	if err := json.Unmarshal(data, clone); err != nil {
		return nil, fmt.Errorf("copy %s %q: %w", r.kind.Resource, obj.GetName(), err)
	}
	return clone, nil
}

// Create stores a new object, stamping its uid and creation time. It fails
// with AlreadyExists if the name is taken.
func (r *Resource[T, PT]) Create(ctx context.Context, obj PT) (PT, error) {
	key, err := r.key(obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil, err
	}
	obj, err = r.copy(obj)
	if err != nil {
		return nil, err
	}
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.NewTime(r.store.clock.Now()))
	value, err := r.encode(obj)
	if err != nil {
		return nil, err
	}
	resp, err := r.store.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("create %s %q: %w", r.kind.Resource, obj.GetName(), err)
	}
	if !resp.Succeeded {
		return nil, apierrors.NewAlreadyExists(r.groupResource(), obj.GetName())
	}
	// Return what Get would: times at the precision they are stored with.
	return r.decode([]byte(value), resp.Header.Revision)
}

// Get returns one object, or NotFound.
func (r *Resource[T, PT]) Get(ctx context.Context, namespace, name string) (PT, error) {
	key, err := r.key(namespace, name)
	if err != nil {
		return nil, err
	}
	resp, err := r.store.client.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", r.kind.Resource, name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, apierrors.NewNotFound(r.groupResource(), name)
	}
	return r.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// List returns every object in a namespace ("" for all) sorted by key, and
// the store revision it reflects, from which a Watch can continue.
func (r *Resource[T, PT]) List(ctx context.Context, namespace string) ([]PT, int64, error) {
	resp, err := r.store.client.Get(ctx, r.prefixFor(namespace), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", r.kind.Resource, err)
	}
	items := make([]PT, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		obj, err := r.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", kv.Key, err)
		}
		items = append(items, obj)
	}
	return items, resp.Header.Revision, nil
}

// Update replaces an object if its resourceVersion is still current, else
// fails with Conflict (or NotFound). The uid and creation time of the stored
// object are kept whatever the caller sent.
func (r *Resource[T, PT]) Update(ctx context.Context, obj PT) (PT, error) {
	current, err := r.Get(ctx, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("update %s %q: metadata.resourceVersion is required", r.kind.Resource, obj.GetName()))
	}
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("update %s %q: metadata.resourceVersion %q is not a number", r.kind.Resource, obj.GetName(), obj.GetResourceVersion()))
	}
	if obj.GetResourceVersion() != current.GetResourceVersion() {
		return nil, r.conflict(obj.GetName())
	}
	key, _ := r.key(obj.GetNamespace(), obj.GetName()) // valid: Get succeeded
	obj, err = r.copy(obj)
	if err != nil {
		return nil, err
	}
	obj.SetUID(current.GetUID())
	obj.SetCreationTimestamp(current.GetCreationTimestamp())
	value, err := r.encode(obj)
	if err != nil {
		return nil, err
	}
	resp, err := r.store.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rv)).
		Then(clientv3.OpPut(key, value)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("update %s %q: %w", r.kind.Resource, obj.GetName(), err)
	}
	if !resp.Succeeded {
		return nil, r.conflict(obj.GetName())
	}
	return r.decode([]byte(value), resp.Header.Revision)
}

func (r *Resource[T, PT]) conflict(name string) error {
	return apierrors.NewConflict(r.groupResource(), name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// Delete removes an object, or fails with NotFound.
func (r *Resource[T, PT]) Delete(ctx context.Context, namespace, name string) error {
	key, err := r.key(namespace, name)
	if err != nil {
		return err
	}
	resp, err := r.store.client.Delete(ctx, key)
	if err != nil {
		return fmt.Errorf("delete %s %q: %w", r.kind.Resource, name, err)
	}
	if resp.Deleted == 0 {
		return apierrors.NewNotFound(r.groupResource(), name)
	}
	return nil
}

// PutBatch writes objects unconditionally, up to 128 per etcd transaction.
// It is for objects with a single writer, such as the leases the hub stamps:
// one write per object per batch, however many renewals came in between.
// Objects without a uid get one and a creation time, in place, so the
// caller's copy keeps them for the next batch. It returns the revision of
// the last transaction.
func (r *Resource[T, PT]) PutBatch(ctx context.Context, objs []PT) (int64, error) {
	var revision int64
	for start := 0; start < len(objs); start += maxTxnOps {
		chunk := objs[start:min(start+maxTxnOps, len(objs))]
		ops := make([]clientv3.Op, 0, len(chunk))
		for _, obj := range chunk {
			key, err := r.key(obj.GetNamespace(), obj.GetName())
			if err != nil {
				return revision, err
			}
			if obj.GetUID() == "" {
				obj.SetUID(uuid.NewUUID())
				obj.SetCreationTimestamp(metav1.NewTime(r.store.clock.Now()))
			}
			value, err := r.encode(obj)
			if err != nil {
				return revision, err
			}
			ops = append(ops, clientv3.OpPut(key, value))
		}
		resp, err := r.store.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return revision, fmt.Errorf("write %d %s: %w", len(ops), r.kind.Resource, err)
		}
		revision = resp.Header.Revision
	}
	return revision, nil
}

// GroupResource names the kind in errors.
func (k Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}
