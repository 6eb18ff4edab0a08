package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// templatesList reads the resource templates that have a binding, as a v1
// List: those of the bindings of namespace t.namespace, or of every
// binding and cluster binding without one; of name t.name, if given. Each
// template is read through the dynamic client, in the version its binding
// names. A binding whose template is gone (or whose kind the hub no longer
// serves) is left out; a template RBAC does not let the user read (the
// ClusterRole flotilla-viewer reads no templates: they may be Secrets) is
// left out with a warning to stderr.
func templatesList(ctx context.Context, c *hubClients, t getTarget, stderr io.Writer) ([]byte, error) {
	bindings, err := c.flotilla.FlotillaV1alpha1().ResourceBindings(t.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the bindings: %w", err)
	}
	var refs []v1alpha1.ObjectReference
	for _, b := range bindings.Items {
		refs = append(refs, b.Spec.Resource)
	}
	if t.namespace == "" {
		clusterBindings, err := c.flotilla.FlotillaV1alpha1().ClusterResourceBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the cluster bindings: %w", err)
		}
		for _, b := range clusterBindings.Items {
			refs = append(refs, b.Spec.Resource)
		}
	}
	items := []map[string]any{}
	seen := map[v1alpha1.ObjectReference]bool{}
	for _, ref := range refs {
		if seen[ref] || (t.name != "" && ref.Name != t.name) {
			continue
		}
		seen[ref] = true
		u, err := getTemplate(ctx, c, ref)
		if apierrors.IsForbidden(err) {
			fmt.Fprintf(stderr, "warning: %v\n", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if u != nil {
			items = append(items, u.Object)
		}
	}
	slices.SortFunc(items, func(a, b map[string]any) int {
		ua, ub := &unstructured.Unstructured{Object: a}, &unstructured.Unstructured{Object: b}
		ga, gb := ua.GroupVersionKind(), ub.GroupVersionKind()
		return cmp.Or(cmp.Compare(ga.Group, gb.Group), cmp.Compare(ga.Kind, gb.Kind),
			cmp.Compare(ua.GetNamespace(), ub.GetNamespace()), cmp.Compare(ua.GetName(), ub.GetName()))
	})
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items})
}

// getTemplate reads the template a binding names; nil when it is gone or
// its kind is no longer served.
func getTemplate(ctx context.Context, c *hubClients, ref v1alpha1.ObjectReference) (*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, nil // not a template the hub could have stored
	}
	m, err := c.mapping(gv.WithKind(ref.Kind))
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding the resource of %s: %w", kindName(gv.WithKind(ref.Kind).GroupKind()), err)
	}
	ri := c.dynamic.Resource(m.Resource)
	var u *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		u, err = ri.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		u, err = ri.Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// templatesTable decodes a v1 List of resource templates of any kind (as
// templatesList makes it) into the "get resources" table.
func templatesTable(raw []byte, o tableOptions) (*table, error) {
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("decoding List: %w", err)
	}
	t := &table{header: []string{"KIND", "NAMESPACE", "NAME", "READY", "AGE"}}
	for _, obj := range list.Items {
		u := &unstructured.Unstructured{Object: obj}
		t.add(templateKind(u), orNone(u.GetNamespace()), u.GetName(), readyReplicas(u),
			age(o.now, u.GetCreationTimestamp().Time))
	}
	return t, nil
}

// templateKind is Kind.group, or Kind for the core group: "Deployment.apps".
func templateKind(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + gvk.Group
}

// readyReplicas is status.readyReplicas/spec.replicas of a workload (the
// hub sums readyReplicas over the clusters into the template's status),
// "-" for kinds without replicas.
func readyReplicas(u *unstructured.Unstructured) string {
	want, ok := numberField(u.Object, "spec", "replicas")
	if !ok {
		return none
	}
	ready, _ := numberField(u.Object, "status", "readyReplicas")
	return fmt.Sprintf("%d/%d", ready, want)
}

// numberField is the whole number at path, as JSON decoding left it.
func numberField(obj map[string]any, path ...string) (int64, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil || !found {
		return 0, false
	}
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
