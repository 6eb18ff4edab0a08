package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/validation"
	"github.com/flotilla-io/flotilla/store"
)

// Outcome is what apply or delete did to one item.
type Outcome struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Action is created, configured, unchanged, deleted or "not found".
	Action string `json:"action"`
}

// Actions of an Outcome.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
	ActionDeleted    = "deleted"
	ActionNotFound   = "not found"
)

// MaxItems bounds one apply or delete request.
const MaxItems = store.MaxTxnObjects

// conflictRetries is how often apply re-reads and retries when a concurrent
// writer changed an item between read and commit.
const conflictRetries = 5

// item is one decoded, validated document of a request.
type item struct {
	policy        *v1alpha1.PropagationPolicy
	clusterPolicy *v1alpha1.ClusterPropagationPolicy
	rebalancer    *appsv1alpha1.WorkloadRebalancer
	template      *unstructured.Unstructured
	namespaced    bool
}

func (it *item) meta() metav1.Object {
	switch {
	case it.policy != nil:
		return it.policy
	case it.clusterPolicy != nil:
		return it.clusterPolicy
	case it.rebalancer != nil:
		return it.rebalancer
	}
	return it.template
}

func (it *item) outcome(action string) Outcome {
	m := it.meta()
	o := Outcome{Namespace: m.GetNamespace(), Name: m.GetName(), Action: action}
	switch {
	case it.policy != nil:
		o.APIVersion, o.Kind = v1alpha1.APIVersion, v1alpha1.KindPropagationPolicy
	case it.clusterPolicy != nil:
		o.APIVersion, o.Kind = v1alpha1.APIVersion, v1alpha1.KindClusterPropagationPolicy
	case it.rebalancer != nil:
		o.APIVersion, o.Kind = appsv1alpha1.APIVersion, appsv1alpha1.KindWorkloadRebalancer
	default:
		o.APIVersion, o.Kind = it.template.GetAPIVersion(), it.template.GetKind()
	}
	return o
}

// identity is the store identity of an item: group, kind, namespace, name.
func (it *item) identity() string {
	o := it.outcome("")
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return gv.Group + "/" + o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Apply validates every item, then creates or replaces them all in one
// transaction. A validation problem anywhere fails the whole request with
// an Invalid error whose causes name items[I] and the field; nothing is
// stored. Templates keep their stored status.
func (o *Objects) Apply(ctx context.Context, raw []json.RawMessage, defaultNamespace string, dryRun bool) ([]Outcome, error) {
	items, err := o.decode(ctx, raw, defaultNamespace, false)
	if err != nil {
		return nil, err
	}
	return o.commit(ctx, items, o.stage, dryRun)
}

// commit stages the write of every item in one transaction and commits
// it, reading and staging again when a concurrent writer got in between.
func (o *Objects) commit(ctx context.Context, items []*item, stage func(context.Context, *store.Txn, *item) (string, error), dryRun bool) ([]Outcome, error) {
	for attempt := 0; ; attempt++ {
		txn := o.Store.NewTxn()
		outcomes := make([]Outcome, len(items))
		for i, it := range items {
			action, err := stage(ctx, txn, it)
			if err != nil {
				return nil, fmt.Errorf("items[%d] %s: %w", i, it.identity(), err)
			}
			outcomes[i] = it.outcome(action)
		}
		if dryRun {
			return outcomes, nil
		}
		_, err := txn.Commit(ctx)
		if apierrors.IsConflict(err) && attempt < conflictRetries {
			continue
		}
		if err != nil {
			return nil, err
		}
		return outcomes, nil
	}
}

// decode parses and validates every item and checks for duplicates.
func (o *Objects) decode(ctx context.Context, raw []json.RawMessage, defaultNamespace string, identityOnly bool) ([]*item, error) {
	if len(raw) > MaxItems {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%d items in one request, limit %d", len(raw), MaxItems))
	}
	if defaultNamespace == "" {
		defaultNamespace = "default"
	}
	scopes, err := o.crdScopes(ctx, raw)
	if err != nil {
		return nil, err
	}
	var errs field.ErrorList
	items := make([]*item, len(raw))
	seen := map[string]int{}
	for i, doc := range raw {
		path := field.NewPath("items").Index(i)
		if identityOnly {
			doc = identityOf(doc)
		}
		it, itemErrs := decodeItem(doc, defaultNamespace, scopes)
		if identityOnly {
			itemErrs = identityErrors(itemErrs)
		}
		for _, e := range itemErrs {
			e.Field = joinField(path.String(), e.Field)
			errs = append(errs, e)
		}
		if it == nil {
			continue
		}
		if first, dup := seen[it.identity()]; dup {
			errs = append(errs, field.Duplicate(path, fmt.Sprintf("same object as items[%d]", first)))
		}
		seen[it.identity()] = i
		items[i] = it
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: v1alpha1.GroupName, Kind: "List"}, "apply", errs)
	}
	return items, nil
}

// identityOf keeps only what names an object (apiVersion, kind, name,
// namespace), for delete: the rest of the document does not matter.
func identityOf(doc json.RawMessage) json.RawMessage {
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc, &obj) != nil {
		return doc // decodeItem reports it
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return doc
	}
	return out
}

// identityErrors keeps the problems of the fields that name an object.
func identityErrors(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		switch {
		case e.Field == "", e.Field == "<nil>", e.Field == "apiVersion", e.Field == "kind",
			e.Field == "metadata.name", e.Field == "metadata.namespace":
			out = append(out, e)
		}
	}
	return out
}

// joinField puts an item's path before a field path of the item; the
// item itself is "<nil>" or "".
func joinField(itemPath, fieldPath string) string {
	fieldPath = strings.TrimPrefix(fieldPath, "<nil>")
	if fieldPath == "" {
		return itemPath
	}
	return itemPath + "." + fieldPath
}

// decodeItem turns one document into an item with its problems.
func decodeItem(doc json.RawMessage, defaultNamespace string, scopes map[schema.GroupKind]bool) (*item, field.ErrorList) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(doc, &tm); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("<nil>"), "", "not a JSON object: "+err.Error())}
	}
	withNamespace := func(namespaced bool) (json.RawMessage, error) { return defaultNS(doc, namespaced, defaultNamespace) }
	if validation.IsPolicyAPIVersion(tm.APIVersion) {
		switch tm.Kind {
		case v1alpha1.KindPropagationPolicy:
			doc, _ = withNamespace(true)
			p, errs := validation.PropagationPolicy(doc)
			if p == nil {
				return nil, errs
			}
			return &item{policy: p, namespaced: true}, errs
		case v1alpha1.KindClusterPropagationPolicy:
			p, errs := validation.ClusterPropagationPolicy(doc)
			if p == nil {
				return nil, errs
			}
			return &item{clusterPolicy: p}, errs
		}
		return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), tm.Kind, []string{v1alpha1.KindPropagationPolicy, v1alpha1.KindClusterPropagationPolicy})}
	}
	if validation.IsRebalancerAPIVersion(tm.APIVersion) {
		if tm.Kind != appsv1alpha1.KindWorkloadRebalancer {
			return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), tm.Kind, []string{appsv1alpha1.KindWorkloadRebalancer})}
		}
		r, errs := validation.WorkloadRebalancer(doc)
		if r == nil {
			return nil, errs
		}
		return &item{rebalancer: r}, errs
	}
	gv, _ := schema.ParseGroupVersion(tm.APIVersion)
	namespaced := !scopes[gv.WithKind(tm.Kind).GroupKind()]
	doc, err := withNamespace(namespaced)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("<nil>"), "", err.Error())}
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(doc); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("<nil>"), "", err.Error())}
	}
	return &item{template: u, namespaced: namespaced}, validation.Template(u, namespaced)
}

// defaultNS fills metadata.namespace of a namespaced document that has none.
func defaultNS(doc json.RawMessage, namespaced bool, namespace string) (json.RawMessage, error) {
	if !namespaced {
		return doc, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return doc, nil // validation reports the missing name
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		return doc, nil
	}
	meta["namespace"] = namespace
	return json.Marshal(obj)
}

// crdScopes is the scope table: built-in cluster-scoped kinds plus the
// cluster-scoped kinds of CRDs stored or in this request.
func (o *Objects) crdScopes(ctx context.Context, raw []json.RawMessage) (map[schema.GroupKind]bool, error) {
	scopes := make(map[schema.GroupKind]bool, len(clusterScopedKinds))
	for gk := range clusterScopedKinds {
		scopes[gk] = true
	}
	stored, _, err := o.Template(schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, false).List(ctx, "")
	if err != nil {
		return nil, err
	}
	add := func(u *unstructured.Unstructured) {
		if gk, cluster, ok := crdScope(u); ok && cluster {
			scopes[gk] = true
		}
	}
	for _, u := range stored {
		add(u)
	}
	for _, doc := range raw {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(doc) == nil {
			add(u)
		}
	}
	return scopes, nil
}

// stage adds the write of one item to txn and says what it will do.
func (o *Objects) stage(ctx context.Context, txn *store.Txn, it *item) (string, error) {
	switch {
	case it.policy != nil:
		return stageTyped(ctx, txn, o.Policies, it.policy, func(stored *v1alpha1.PropagationPolicy) bool {
			return equality.Semantic.DeepEqual(stored.Spec, it.policy.Spec) && sameMeta(stored, it.policy)
		})
	case it.clusterPolicy != nil:
		return stageTyped(ctx, txn, o.ClusterPolicies, it.clusterPolicy, func(stored *v1alpha1.ClusterPropagationPolicy) bool {
			return equality.Semantic.DeepEqual(stored.Spec, it.clusterPolicy.Spec) && sameMeta(stored, it.clusterPolicy)
		})
	case it.rebalancer != nil:
		// The status is the hub's: an apply keeps it, and a spec change
		// bumps the generation, so the rebalancer controller acts on it.
		return stageTyped(ctx, txn, o.Rebalancers, it.rebalancer, func(stored *appsv1alpha1.WorkloadRebalancer) bool {
			it.rebalancer.Status = stored.Status
			return equality.Semantic.DeepEqual(stored.Spec, it.rebalancer.Spec) && sameMeta(stored, it.rebalancer)
		})
	}
	return o.stageTemplate(ctx, txn, it)
}

func sameMeta(a, b metav1.Object) bool {
	return equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) && equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations())
}

// stageTyped stages a create, or an update on top of the stored version
// that bumps the generation, or nothing when unchanged says so.
func stageTyped[T any, PT store.Object[T]](ctx context.Context, txn *store.Txn, r *store.Resource[T, PT], obj PT, unchanged func(stored PT) bool) (string, error) {
	stored, err := r.Get(ctx, obj.GetNamespace(), obj.GetName())
	switch {
	case apierrors.IsNotFound(err):
		obj.SetGeneration(1)
		r.TxnCreate(txn, obj)
		return ActionCreated, nil
	case err != nil:
		return "", err
	case unchanged(stored):
		return ActionUnchanged, nil
	}
	obj.SetUID(stored.GetUID())
	obj.SetCreationTimestamp(stored.GetCreationTimestamp())
	obj.SetResourceVersion(stored.GetResourceVersion())
	obj.SetGeneration(stored.GetGeneration() + 1)
	r.TxnUpdate(txn, obj)
	return ActionConfigured, nil
}

// stageTemplate stages a template, keeping the stored status.
func (o *Objects) stageTemplate(ctx context.Context, txn *store.Txn, it *item) (string, error) {
	u := it.template
	r := o.Template(u.GroupVersionKind().GroupKind(), it.namespaced)
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	return stageTyped(ctx, txn, r, u, func(stored *unstructured.Unstructured) bool {
		if status, ok := stored.Object["status"]; ok {
			u.Object["status"] = status
		}
		return equality.Semantic.DeepEqual(templateContent(stored), templateContent(u))
	})
}

// templateContent is a template without the metadata the store sets.
func templateContent(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c.Object
}
