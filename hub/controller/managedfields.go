package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The hub keeps no server-side apply bookkeeping on the objects it rewrites
// all the time (Clusters, their Leases, bindings). The API server records,
// for every update, which manager set which field (metadata.managedFields):
// on a Cluster that is about half of the object, decoded and re-encoded on
// each write and held, as nested maps, in the API server's watch cache. An
// update whose managedFields is one empty entry drops them, and the API
// server then tracks no further update of that object (status included)
// until someone applies it server-side.

// ResetManagedFields is the value that tells the API server to drop an
// object's managedFields in an update (not through a subresource).
func ResetManagedFields() []metav1.ManagedFieldsEntry { return []metav1.ManagedFieldsEntry{{}} }

// WorthStripping reports whether the hub may drop stored managedFields:
// there are some, and none comes from a server-side apply, whose manager
// relies on them to detect conflicts (a GitOps tool applying the object
// keeps them, and the hub's updates stay tracked beside them).
func WorthStripping(entries []metav1.ManagedFieldsEntry) bool {
	if len(entries) == 0 {
		return false
	}
	for _, e := range entries {
		if e.Operation == metav1.ManagedFieldsOperationApply {
			return false
		}
	}
	return true
}

// DropManagedFields makes an update of obj, as read from the API, drop its
// managedFields if WorthStripping allows.
func DropManagedFields(obj metav1.Object) {
	if WorthStripping(obj.GetManagedFields()) {
		obj.SetManagedFields(ResetManagedFields())
	}
}
