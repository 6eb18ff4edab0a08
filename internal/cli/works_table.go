package cli

import (
	"strconv"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// bindingAnnotation names the binding a Work was rendered for: "NS/NAME",
// or "NAME" for a ClusterResourceBinding.
const bindingAnnotation = v1alpha1.AnnotationWorkBinding

// worksTable decodes the hub's answer (a WorkList, or one Work when single)
// into the "get works" table. Works live in a namespace per cluster, so the
// column that spans namespaces is CLUSTER.
func worksTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[v1alpha1.Work](raw, o.single, "Work")
	if err != nil {
		return nil, err
	}
	t := o.newTable("CLUSTER", "NAME", "BINDING", "GENERATION", "ACKED", "APPLIED", "DELETING", "AGE")
	for i := range items {
		w := &items[i]
		t.add(o.row(workCluster(w), w.Name, orNone(w.Annotations[bindingAnnotation]), strconv.FormatInt(w.Generation, 10),
			acked(w), conditionStatus(w.Status.Conditions, v1alpha1.WorkConditionApplied), deleting(w),
			age(o.now, w.CreationTimestamp.Time))...)
	}
	return t, nil
}

// workCluster is the cluster of a Work, from its execution namespace.
func workCluster(w *v1alpha1.Work) string {
	return strings.TrimPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix)
}

// acked is the generation the agent acknowledged, "-" before its first.
func acked(w *v1alpha1.Work) string {
	if w.Status.ObservedGeneration == 0 {
		return none
	}
	return strconv.FormatInt(w.Status.ObservedGeneration, 10)
}

// deleting says whether the Work is a tombstone waiting for its agent to
// confirm that the objects are gone.
func deleting(w *v1alpha1.Work) string {
	if w.DeletionTimestamp != nil {
		return "yes"
	}
	return "no"
}
