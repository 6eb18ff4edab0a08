package cli

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Kinds of bindings, as events name them.
const (
	kindResourceBinding        = v1alpha1.KindResourceBinding
	kindClusterResourceBinding = v1alpha1.KindClusterResourceBinding
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
func describeBindingNamed(ctx context.Context, inv *invocation, c *hubClients, ns, name string) error {
	d, err := fetchBindingDetails(ctx, c, ns, name)
	if err != nil {
		return err
	}
	return writeBindingDescription(inv.Stdout, d, inv.Now())
}

// fetchBindingDetails reads the binding, its Works and its events.
func fetchBindingDetails(ctx context.Context, c *hubClients, ns, name string) (*bindingDetails, error) {
	d := &bindingDetails{kind: kindResourceBinding}
	ref := ns + "/" + name
	if ns == "" {
		d.kind, ref = kindClusterResourceBinding, name
		crb, err := c.flotilla.FlotillaV1alpha1().ClusterResourceBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		// A ClusterResourceBinding has the shape of a ResourceBinding.
		d.binding = &v1alpha1.ResourceBinding{TypeMeta: crb.TypeMeta, ObjectMeta: crb.ObjectMeta, Spec: crb.Spec, Status: crb.Status}
	} else {
		rb, err := c.flotilla.FlotillaV1alpha1().ResourceBindings(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		d.binding = rb
	}
	works, err := c.flotilla.FlotillaV1alpha1().Works(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the works: %w", err)
	}
	d.works = bindingWorks(works.Items, ref)
	d.events, err = c.objectEvents(ctx, d.kind, ns, name)
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
		if w.Annotations[v1alpha1.AnnotationWorkBinding] == ref {
			mine = append(mine, w)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Namespace < mine[j].Namespace })
	return mine
}
