package cli

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// templatesTable decodes the hub's answer (a v1 List of resource
// templates of any kind) into the "get resources" table.
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
// hub sums readyReplicas over the clusters), "-" for kinds without
// replicas.
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
