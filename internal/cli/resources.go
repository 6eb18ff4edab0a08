package cli

import (
	"context"
	"fmt"
	"net/url"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// Paths of the hub's HTTP API.
const (
	flotillaPath  = "/apis/" + v1alpha1.GroupName + "/" + v1alpha1.Version
	clustersPath  = flotillaPath + "/clusters"
	leasesPath    = "/apis/coordination.k8s.io/v1/namespaces/" + v1alpha1.LeaseNamespace + "/leases"
	eventsPath    = "/api/v1/events"
	applyPath     = flotillaPath + "/apply"
	deletePath    = flotillaPath + "/delete"
	templatesPath = flotillaPath + "/resources"

	rebalancersPath = "/apis/" + appsv1alpha1.GroupName + "/" + appsv1alpha1.Version + "/workloadrebalancers"
)

// Resources (URL path segments) of Flotilla's kinds.
const (
	policiesResource        = "propagationpolicies"
	clusterPoliciesResource = "clusterpropagationpolicies"
	bindingsResource        = "resourcebindings"
	clusterBindingsResource = "clusterresourcebindings"
	worksResource           = "works"
)

// collectionPath is the path of a list of Flotilla objects: those of
// namespace ns, or of every namespace when ns is empty (the only path of
// cluster-scoped kinds).
func collectionPath(resource, ns string) string {
	if ns == "" {
		return flotillaPath + "/" + resource
	}
	return flotillaPath + "/namespaces/" + url.PathEscape(ns) + "/" + resource
}

// objectPath is the path of one Flotilla object; ns is empty for
// cluster-scoped kinds.
func objectPath(resource, ns, name string) string {
	return collectionPath(resource, ns) + "/" + url.PathEscape(name)
}

func rebalancerPath(name string) string { return rebalancersPath + "/" + url.PathEscape(name) }

func clusterPath(name string) string { return clustersPath + "/" + url.PathEscape(name) }

func leasePath(name string) string { return leasesPath + "/" + url.PathEscape(name) }

// getCluster reads one cluster.
func (c *client) getCluster(ctx context.Context, name string) (*v1alpha1.Cluster, error) {
	var cl v1alpha1.Cluster
	if _, err := c.getJSON(ctx, clusterPath(name), nil, &cl); err != nil {
		return nil, err
	}
	return &cl, nil
}

// putCluster replaces a cluster; cl carries the resourceVersion it was
// read at, so a concurrent change makes the hub answer 409 Conflict.
func (c *client) putCluster(ctx context.Context, cl *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	if cl.APIVersion == "" || cl.Kind == "" {
		cl.TypeMeta = v1alpha1.TypeMeta(v1alpha1.KindCluster)
	}
	var out v1alpha1.Cluster
	if err := c.putJSON(ctx, clusterPath(cl.Name), cl, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// getLease reads the lease of one cluster.
func (c *client) getLease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	if _, err := c.getJSON(ctx, leasePath(name), nil, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// clusterEvents lists the events about one cluster, oldest first.
func (c *client) clusterEvents(ctx context.Context, name string) ([]corev1.Event, error) {
	q := url.Values{}
	q.Set("involvedObject.kind", v1alpha1.KindCluster)
	q.Set("involvedObject.name", name)
	var list corev1.EventList
	if _, err := c.getJSON(ctx, eventsPath, q, &list); err != nil {
		return nil, fmt.Errorf("listing the events of cluster %q: %w", name, err)
	}
	return list.Items, nil
}
