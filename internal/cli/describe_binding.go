package cli

import (
	"context"
	"fmt"
	"net/url"
	"sort"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Kinds of bindings, as events name them.
const (
	kindResourceBinding        = "ResourceBinding"
	kindClusterResourceBinding = "ClusterResourceBinding"
)

// bindingDetails is what describe shows of a binding.
type bindingDetails struct {
	kind string // kindResourceBinding or kindClusterResourceBinding
	// binding holds a ClusterResourceBinding too: they have one shape.
	binding *v1alpha1.ResourceBinding
	works   []v1alpha1.Work // sorted by cluster
	events  []corev1.Event  // oldest first
}

// describeBindingNamed prints the binding ns/name, or the cluster binding
// name when ns is empty.
func describeBindingNamed(ctx context.Context, inv *invocation, ns, name string) error {
	d, err := fetchBindingDetails(ctx, inv.client(), ns, name)
	if err != nil {
		return err
	}
	return writeBindingDescription(inv.Stdout, d, inv.Now())
}

// fetchBindingDetails reads the binding, its Works and its events. Works
// and events the hub cannot list are shown as <none>, not an error.
func fetchBindingDetails(ctx context.Context, c *client, ns, name string) (*bindingDetails, error) {
	d := &bindingDetails{kind: kindResourceBinding}
	resource, ref := bindingsResource, ns+"/"+name
	if ns == "" {
		d.kind, resource, ref = kindClusterResourceBinding, clusterBindingsResource, name
	}
	d.binding = &v1alpha1.ResourceBinding{}
	if _, err := c.getJSON(ctx, objectPath(resource, ns, name), nil, d.binding); err != nil {
		return nil, err
	}
	works, err := c.listWorks(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	d.works = bindingWorks(works, ref)
	d.events, err = c.objectEvents(ctx, d.kind, ns, name)
	if apierrors.IsNotFound(err) {
		d.events, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// bindingWorks keeps the Works rendered for the binding ref ("NS/NAME", or
// "NAME" for a cluster binding), sorted by cluster.
func bindingWorks(works []v1alpha1.Work, ref string) []v1alpha1.Work {
	var mine []v1alpha1.Work
	for _, w := range works {
		if w.Annotations[bindingAnnotation] == ref {
			mine = append(mine, w)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Namespace < mine[j].Namespace })
	return mine
}

// listWorks reads the Works of every cluster.
func (c *client) listWorks(ctx context.Context) ([]v1alpha1.Work, error) {
	var list v1alpha1.WorkList
	if _, err := c.getJSON(ctx, collectionPath(worksResource, ""), nil, &list); err != nil {
		return nil, fmt.Errorf("listing the works: %w", err)
	}
	return list.Items, nil
}

// objectEvents lists the events about one object, oldest first; ns is
// empty for a cluster-scoped object.
func (c *client) objectEvents(ctx context.Context, kind, ns, name string) ([]corev1.Event, error) {
	selector := "involvedObject.kind=" + kind + ",involvedObject.name=" + name
	if ns != "" {
		selector += ",involvedObject.namespace=" + ns
	}
	q := url.Values{}
	q.Set("fieldSelector", selector)
	var list corev1.EventList
	if _, err := c.getJSON(ctx, eventsPath, q, &list); err != nil {
		return nil, fmt.Errorf("listing the events of %s %q: %w", kind, name, err)
	}
	return list.Items, nil
}
