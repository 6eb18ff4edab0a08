package hub

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

// Kinds the hub keeps in its store.
var (
	ClusterKind = objects.ClusterKind
	LeaseKind   = store.Kind{Resource: "leases", GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Namespaced: true}
	EventKind   = store.Kind{Resource: "events", GVK: corev1.SchemeGroupVersion.WithKind("Event"), Namespaced: true}
)
