package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	flotillainformers "github.com/flotilla-io/flotilla/api/client/informers/externalversions"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// IndexWorksByBinding indexes Works by the binding key in their
// flotilla.io/binding annotation ("namespace/name", or "name").
const IndexWorksByBinding = "binding"

// Informers are the hub's shared informers: one watch per kind, shared by
// every controller. Build them, add handlers (in the controllers' New),
// then Start.
type Informers struct {
	factory flotillainformers.SharedInformerFactory

	Clusters        *Shared[*v1alpha1.Cluster]
	Policies        *Shared[*v1alpha1.PropagationPolicy]
	ClusterPolicies *Shared[*v1alpha1.ClusterPropagationPolicy]
	Bindings        *Shared[*v1alpha1.ResourceBinding]
	ClusterBindings *Shared[*v1alpha1.ClusterResourceBinding]
	// Works has the index IndexWorksByBinding and the namespace index
	// (cache.NamespaceIndex: a cluster's Works are in its namespace).
	Works         *Shared[*v1alpha1.Work]
	Rebalancers   *Shared[*appsv1alpha1.WorkloadRebalancer]
	Purges        *Shared[*v1alpha1.PurgeRequest]
	TaintPolicies *Shared[*v1alpha1.ClusterTaintPolicy]
	// Templates holds every resource template, whatever its kind, keyed
	// by names.TemplateKey; set by the hub (package templates).
	Templates Source[*unstructured.Unstructured]
}

// NewInformers creates the shared informers of Flotilla's kinds over
// clients; templates is the Source of every template (nil in tests that
// need none).
func NewInformers(clients *kube.Clients, templates Source[*unstructured.Unstructured]) (*Informers, error) {
	f := flotillainformers.NewSharedInformerFactory(clients.Flotilla, 0)
	v1 := f.Flotilla().V1alpha1()
	works := v1.Works().Informer()
	if err := works.AddIndexers(cache.Indexers{IndexWorksByBinding: func(obj any) ([]string, error) {
		w, ok := obj.(*v1alpha1.Work)
		if !ok || w.Annotations[v1alpha1.AnnotationWorkBinding] == "" {
			return nil, nil
		}
		return []string{w.Annotations[v1alpha1.AnnotationWorkBinding]}, nil
	}}); err != nil {
		return nil, fmt.Errorf("index Works: %w", err)
	}
	return &Informers{
		factory:         f,
		Clusters:        NewShared[*v1alpha1.Cluster](v1.Clusters().Informer()),
		Policies:        NewShared[*v1alpha1.PropagationPolicy](v1.PropagationPolicies().Informer()),
		ClusterPolicies: NewShared[*v1alpha1.ClusterPropagationPolicy](v1.ClusterPropagationPolicies().Informer()),
		Bindings:        NewShared[*v1alpha1.ResourceBinding](v1.ResourceBindings().Informer()),
		ClusterBindings: NewShared[*v1alpha1.ClusterResourceBinding](v1.ClusterResourceBindings().Informer()),
		Works:           NewShared[*v1alpha1.Work](works),
		Rebalancers:     NewShared[*appsv1alpha1.WorkloadRebalancer](f.Apps().V1alpha1().WorkloadRebalancers().Informer()),
		Purges:          NewShared[*v1alpha1.PurgeRequest](v1.PurgeRequests().Informer()),
		TaintPolicies:   NewShared[*v1alpha1.ClusterTaintPolicy](v1.ClusterTaintPolicies().Informer()),
		Templates:       templates,
	}, nil
}

// NewAgentInformers creates only what serving agents needs, Clusters and
// Works: a hub replica that stands by watches nothing else.
func NewAgentInformers(clients *kube.Clients) *Informers {
	f := flotillainformers.NewSharedInformerFactory(clients.Flotilla, 0)
	v1 := f.Flotilla().V1alpha1()
	return &Informers{
		factory:  f,
		Clusters: NewShared[*v1alpha1.Cluster](v1.Clusters().Informer()),
		Works:    NewShared[*v1alpha1.Work](v1.Works().Informer()),
	}
}

// Start runs every informer created so far until ctx ends.
func (i *Informers) Start(ctx context.Context) { i.factory.Start(ctx.Done()) }
