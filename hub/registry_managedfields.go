package hub

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The registry keeps no server-side apply bookkeeping on the objects it
// rewrites all the time (Clusters and their Leases). The API server
// records, for every update, which manager set which field
// (metadata.managedFields): on a Cluster that is about half of the
// object, decoded and re-encoded on each status write and held, as nested
// maps, in the API server's watch cache. An update whose managedFields is
// one empty entry drops them, and the API server then tracks no further
// update of that object until someone applies it server-side.

// resetManagedFields is the value that tells the API server to drop an
// object's managedFields.
func resetManagedFields() []metav1.ManagedFieldsEntry { return []metav1.ManagedFieldsEntry{{}} }

// worthStripping reports whether the hub may drop stored managedFields:
// there are some, and none comes from a server-side apply, whose manager
// relies on them to detect conflicts (a GitOps tool applying Clusters
// keeps them, and the hub's updates stay tracked beside them).
func worthStripping(entries []metav1.ManagedFieldsEntry) bool {
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
