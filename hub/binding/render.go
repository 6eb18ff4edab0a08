package binding

import (
	"encoding/json"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// metadataKept are the template's metadata fields a member cluster gets.
var metadataKept = []string{"name", "namespace", "labels", "annotations"}

// lastApplied is kubectl's record of a client-side apply; it means nothing
// in the member cluster.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// render is the manifest of a template for one cluster: without status
// and hub metadata, with the cluster's share of the replicas when the
// binding divides them, and with the preserved state's labels (which win
// over the template's own).
func render(template *unstructured.Unstructured, divided bool, replicas int32, preserved map[string]string) (v1alpha1.Manifest, error) {
	out := template.DeepCopy()
	delete(out.Object, "status")
	meta, _ := out.Object["metadata"].(map[string]any)
	kept := map[string]any{}
	for _, f := range metadataKept {
		if v, ok := meta[f]; ok {
			kept[f] = v
		}
	}
	out.Object["metadata"] = kept
	annotations := out.GetAnnotations()
	delete(annotations, lastApplied)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(out.Object, "metadata", "annotations")
	} else {
		out.SetAnnotations(annotations)
	}
	if len(preserved) > 0 {
		labels := out.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, preserved)
		out.SetLabels(labels)
	}
	if divided {
		if err := setReplicas(out, replicas); err != nil {
			return v1alpha1.Manifest{}, err
		}
	}
	raw, err := json.Marshal(out.Object)
	if err != nil {
		return v1alpha1.Manifest{}, fmt.Errorf("render %s %s/%s: %w", template.GetKind(), template.GetNamespace(), template.GetName(), err)
	}
	var m v1alpha1.Manifest
	m.Raw = raw
	return m, nil
}

// setReplicas revises a workload's replicas (a Job's parallelism).
func setReplicas(u *unstructured.Unstructured, replicas int32) error {
	field := "replicas"
	if u.GetKind() == "Job" && u.GroupVersionKind().Group == "batch" {
		field = "parallelism"
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec"); !found {
		return nil // not a workload: nothing to divide
	}
	return unstructured.SetNestedField(u.Object, int64(replicas), "spec", field)
}
