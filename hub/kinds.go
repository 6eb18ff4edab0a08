package hub

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/store"
)

// Kinds the hub keeps in its store.
var (
	ClusterKind = store.Kind{Resource: "clusters", GVK: schema.GroupVersionKind{Group: v1alpha1.GroupName, Version: v1alpha1.Version, Kind: v1alpha1.KindCluster}}
	LeaseKind   = store.Kind{Resource: "leases", GVK: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Namespaced: true}
	EventKind   = store.Kind{Resource: "events", GVK: corev1.SchemeGroupVersion.WithKind("Event"), Namespaced: true}
)
