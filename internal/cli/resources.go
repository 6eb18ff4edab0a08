package cli

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Resources (URL path segments) of the kinds flotilla reads.
const (
	clustersResource        = "clusters"
	leasesResource          = "leases"
	policiesResource        = "propagationpolicies"
	clusterPoliciesResource = "clusterpropagationpolicies"
	bindingsResource        = "resourcebindings"
	clusterBindingsResource = "clusterresourcebindings"
	worksResource           = "works"
	rebalancersResource     = "workloadrebalancers"
)

// getCluster reads one cluster.
func (c *hubClients) getCluster(ctx context.Context, name string) (*v1alpha1.Cluster, error) {
	return c.flotilla.FlotillaV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
}

// getLease reads the lease of one cluster.
func (c *hubClients) getLease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	return c.kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).Get(ctx, name, metav1.GetOptions{})
}

// objectEvents lists the events about one object, oldest first; ns is
// empty for a cluster-scoped object (whose events live in any namespace,
// default by the recorder's convention).
func (c *hubClients) objectEvents(ctx context.Context, kind, ns, name string) ([]corev1.Event, error) {
	terms := []fields.Selector{fields.OneTermEqualSelector("involvedObject.kind", kind), fields.OneTermEqualSelector("involvedObject.name", name)}
	if ns != "" {
		terms = append(terms, fields.OneTermEqualSelector("involvedObject.namespace", ns))
	}
	list, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(terms...).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the events of %s %q: %w", kind, name, err)
	}
	events := list.Items
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	return events, nil
}

// mapping finds the resource of a kind through discovery. A kind the
// cached discovery does not know (a CRD created since) makes it read
// discovery again, at most once until something invalidates it.
func (c *hubClients) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) && !c.mapperFresh {
		c.mapper.Reset()
		c.mapperFresh = true
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// invalidateMapper makes the next mapping of an unknown kind read
// discovery again: a CRD was just created.
func (c *hubClients) invalidateMapper() {
	c.mapper.Reset()
	c.mapperFresh = true
}

// kindName is "Kind.group", or "Kind" for the core group, for messages.
func kindName(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}
