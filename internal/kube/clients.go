// Package kube builds the clients of the hub's API server from one client
// configuration: Flotilla's typed clientset, the Kubernetes clientset, and
// a dynamic client with a REST mapper for objects of any kind. The hub's
// controllers and the flotilla CLI share it.
package kube

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
)

// Clients reach the hub's API server.
type Clients struct {
	Flotilla flotillaclient.Interface
	Kube     kubernetes.Interface
	// Dynamic and Mapper read and write templates of any kind; on a
	// no-match error, Mapper.Reset() and try once more (a CRD may be new).
	Dynamic dynamic.Interface
	Mapper  *restmapper.DeferredDiscoveryRESTMapper
}

// NewClients builds every client from one configuration.
func NewClients(cfg *rest.Config) (*Clients, error) {
	flotilla, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("flotilla client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &Clients{Flotilla: flotilla, Kube: kube, Dynamic: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}
