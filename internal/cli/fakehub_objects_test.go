package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file serves the apply, delete and reading paths of docs/api.md
// over the fake hub's objects.

// objectKey identifies an object as the hub does: API group, kind,
// namespace (empty for cluster-scoped kinds) and name.
type objectKey struct {
	group, kind, namespace, name string
}

// karmadaPolicyAPIVersion is accepted for policies, which the hub stores
// as Flotilla's.
const karmadaPolicyAPIVersion = "policy.karmada.io/v1alpha1"

// clusterScopedKinds never get a namespace.
var clusterScopedKinds = []string{
	"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume",
	"StorageClass", "PriorityClass", "IngressClass", "ClusterPropagationPolicy", kindClusterResourceBinding,
}

func (h *fakeHub) routeObjects(mux *http.ServeMux) {
	mux.HandleFunc("POST "+applyPath, h.apply)
	mux.HandleFunc("POST "+deletePath, h.delete)
	mux.HandleFunc("GET "+templatesPath, h.listTemplates)
	for _, k := range []struct {
		resource, kind string
		namespaced     bool
	}{
		{policiesResource, "PropagationPolicy", true},
		{clusterPoliciesResource, "ClusterPropagationPolicy", false},
		{bindingsResource, kindResourceBinding, true},
		{clusterBindingsResource, kindClusterResourceBinding, false},
		{worksResource, "Work", true},
	} {
		all := flotillaPath + "/" + k.resource
		mux.HandleFunc("GET "+all, h.listKind(k.kind))
		if !k.namespaced {
			mux.HandleFunc("GET "+all+"/{name}", h.getKind(k.resource, k.kind))
			continue
		}
		ns := flotillaPath + "/namespaces/{ns}/" + k.resource
		mux.HandleFunc("GET "+ns, h.listKind(k.kind))
		mux.HandleFunc("GET "+ns+"/{name}", h.getKind(k.resource, k.kind))
	}
}

// addObject stores a typed object (a binding or a Work) as the hub would
// serve it.
func (h *fakeHub) addObject(t *testing.T, obj any) {
	t.Helper()
	m := toMap(t, obj)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.objects[keyOf(m)] = m
}

func toMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// storedKeys returns the keys of the objects, sorted, for tests.
func (h *fakeHub) storedKeys() []objectKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sortedObjectKeys()
}

func compareKeys(a, b objectKey) int {
	return strings.Compare(a.group+"/"+a.kind+"/"+a.namespace+"/"+a.name, b.group+"/"+b.kind+"/"+b.namespace+"/"+b.name)
}

func keyOf(obj map[string]any) objectKey {
	meta, _ := obj["metadata"].(map[string]any)
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return objectKey{group: schema.FromAPIVersionAndKind(apiVersion, kind).Group, kind: kind, namespace: ns, name: name}
}

// applyItem is an item of an apply or delete request, normalised the way
// the hub stores it: policies as Flotilla's, the namespace defaulted.
type applyItem struct {
	obj map[string]any
	key objectKey
}

// readItems decodes the request's List and normalises its items; a body
// that is not a List of objects is answered with 400.
func readItems(w http.ResponseWriter, r *http.Request) ([]applyItem, bool) {
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.NewDecoder(r.Body).Decode(&list); err != nil || list.Kind != "List" {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the body must be a List of objects: %v", err))
		return nil, false
	}
	ns := cmp.Or(r.URL.Query().Get("namespace"), defaultNamespace)
	items := make([]applyItem, len(list.Items))
	for i, obj := range list.Items {
		if obj["apiVersion"] == karmadaPolicyAPIVersion {
			obj["apiVersion"] = v1alpha1.APIVersion
		}
		meta, _ := obj["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			obj["metadata"] = meta
		}
		kind, _ := obj["kind"].(string)
		switch {
		case slices.Contains(clusterScopedKinds, kind):
			delete(meta, "namespace")
		case meta["namespace"] == nil || meta["namespace"] == "":
			meta["namespace"] = ns
		}
		items[i] = applyItem{obj: obj, key: keyOf(obj)}
	}
	return items, true
}

// apply validates every item, then stores all of them unless dryRun, as
// one transaction.
func (h *fakeHub) apply(w http.ResponseWriter, r *http.Request) {
	items, ok := readItems(w, r)
	if !ok {
		return
	}
	if errs := validateItems(items); len(errs) > 0 {
		st := apierrors.NewInvalid(schema.GroupKind{Kind: "List"}, "", errs).ErrStatus
		st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
		writeJSON(w, http.StatusUnprocessableEntity, st)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	dryRun := r.URL.Query().Get("dryRun") == "true"
	results := make([]map[string]string, len(items))
	for i, it := range items {
		results[i] = actionOf(it, h.applyAction(it))
		if !dryRun {
			h.store(it)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "ApplyResult", "items": results})
}

// applyAction is created, configured or unchanged: applying replaces
// everything but status.
func (h *fakeHub) applyAction(it applyItem) string {
	old, ok := h.objects[it.key]
	switch {
	case !ok:
		return "created"
	case reflect.DeepEqual(withoutStatus(old), withoutStatus(it.obj)):
		return "unchanged"
	}
	return "configured"
}

func (h *fakeHub) store(it applyItem) {
	obj := withoutStatus(it.obj)
	if old, ok := h.objects[it.key]; ok && old["status"] != nil {
		obj["status"] = old["status"]
	}
	h.objects[it.key] = obj
}

func withoutStatus(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	return out
}

func actionOf(it applyItem, action string) map[string]string {
	apiVersion, _ := it.obj["apiVersion"].(string)
	return map[string]string{
		"apiVersion": apiVersion, "kind": it.key.kind, "namespace": it.key.namespace, "name": it.key.name, "action": action,
	}
}

// validateItems is the little of the hub's validation the tests need: a
// name, and a replica scheduling type the scheduler knows.
func validateItems(items []applyItem) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		path := field.NewPath("items").Index(i)
		if it.key.name == "" {
			errs = append(errs, field.Required(path.Child("metadata", "name"), ""))
		}
		if !strings.HasSuffix(it.key.kind, "PropagationPolicy") {
			continue
		}
		typ, _ := nested(it.obj, "spec", "placement", "replicaScheduling", "replicaSchedulingType").(string)
		if typ != "" && typ != v1alpha1.ReplicaSchedulingTypeDuplicated && typ != v1alpha1.ReplicaSchedulingTypeDivided {
			errs = append(errs, field.NotSupported(path.Child("spec", "placement", "replicaScheduling", "replicaSchedulingType"),
				typ, []string{v1alpha1.ReplicaSchedulingTypeDuplicated, v1alpha1.ReplicaSchedulingTypeDivided}))
		}
	}
	return errs
}

func nested(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// delete deletes every item it has and says which it did not have.
func (h *fakeHub) delete(w http.ResponseWriter, r *http.Request) {
	items, ok := readItems(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	results := make([]map[string]string, len(items))
	for i, it := range items {
		action := actionNotFound
		if _, ok := h.objects[it.key]; ok {
			action = "deleted"
			delete(h.objects, it.key)
		}
		results[i] = actionOf(it, action)
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": "DeleteResult", "items": results})
}

// listTemplates serves the resource templates: every object but policies,
// bindings and Works, filtered by the query parameters.
func (h *fakeHub) listTemplates(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := r.URL.Query()
	items := []map[string]any{}
	for _, k := range h.sortedObjectKeys() {
		obj := h.objects[k]
		if k.group == v1alpha1.GroupName {
			continue
		}
		apiVersion, _ := obj["apiVersion"].(string)
		got := map[string]string{"apiVersion": apiVersion, "kind": k.kind, "namespace": k.namespace, "name": k.name}
		want := map[string]string{}
		for _, p := range []string{"apiVersion", "kind", "namespace", "name"} {
			if v := q.Get(p); v != "" {
				want[p] = v
			}
		}
		if matches(got, want) {
			items = append(items, obj)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}

// listKind serves the list of a Flotilla kind, of the namespace in the
// path or of all of them.
func (h *fakeHub) listKind(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		items := []map[string]any{}
		for _, k := range h.sortedObjectKeys() {
			if k.group == v1alpha1.GroupName && k.kind == kind && (r.PathValue("ns") == "" || r.PathValue("ns") == k.namespace) {
				items = append(items, h.objects[k])
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": kind + "List", "items": items})
	}
}

// getKind serves one object of a Flotilla kind.
func (h *fakeHub) getKind(resource, kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		key := objectKey{group: v1alpha1.GroupName, kind: kind, namespace: r.PathValue("ns"), name: r.PathValue("name")}
		obj, ok := h.objects[key]
		if !ok {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
				fmt.Sprintf("%s.%s %q not found", resource, v1alpha1.GroupName, key.name))
			return
		}
		writeJSON(w, http.StatusOK, obj)
	}
}

func (h *fakeHub) sortedObjectKeys() []objectKey {
	keys := make([]objectKey, 0, len(h.objects))
	for k := range h.objects {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}
