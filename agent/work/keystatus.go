package work

import (
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/internal/jsonpathvalue"
)

// keyStatusFields are the status fields reported per kind: enough for the
// hub to see progress and availability, and the state statePreservation
// rules read, without shipping whole objects (the hub stores at most 4 KiB
// of them per manifest).
var keyStatusFields = map[schema.GroupKind][]string{
	{Group: "apps", Kind: "Deployment"}:  replicaFields,
	{Group: "apps", Kind: "StatefulSet"}: statefulSetFields,
	{Group: "apps", Kind: "ReplicaSet"}:  replicaFields,
	{Group: "apps", Kind: "DaemonSet"}:   {"desiredNumberScheduled", "numberReady", "numberAvailable"},
	jobKind:                              {"active", "succeeded", "failed"},
}

var replicaFields = []string{"replicas", "readyReplicas", "availableReplicas", "updatedReplicas"}

// statefulSetFields add the revisions, which name the state a
// StatefulSet's pods run: a policy's statePreservation rules may keep
// them across a failover.
var statefulSetFields = append(slices.Clip(replicaFields), "currentRevision", "updateRevision")

// keyStatus returns the key status fields of obj that are present, as a
// JSON object, or nil for kinds without key fields or when none is set.
func keyStatus(obj *unstructured.Unstructured) json.RawMessage {
	fields := keyStatusFields[obj.GroupVersionKind().GroupKind()]
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	found := map[string]any{}
	for _, f := range fields {
		if v, ok := status[f]; ok {
			found[f] = v
		}
	}
	if len(found) == 0 {
		return nil
	}
	raw, err := json.Marshal(found) // values from a decoded object always marshal
	if err != nil {
		return nil
	}
	return raw
}

// stateValues evaluates each template on obj's status: the values the
// hub's statePreservation rules read, of any kind and any field, without
// shipping the whole status. A template that does not evaluate (a field
// missing, as before the workload reports it, or a template that does not
// parse) has no value, and the hub says so when it needs it; an apply
// never fails over it. Values are at most jsonpathvalue.MaxBytes long.
// Nil without templates or values.
func stateValues(obj *unstructured.Unstructured, paths []string) map[string]string {
	if len(paths) == 0 {
		return nil
	}
	status, ok := obj.Object["status"]
	if !ok {
		return nil
	}
	var out map[string]string
	for _, p := range paths {
		v, err := jsonpathvalue.Eval(status, p)
		if err != nil {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(paths))
		}
		out[p] = v
	}
	return out
}
