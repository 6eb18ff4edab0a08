package templates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// templateVerbs are what an informer needs of a resource.
var templateVerbs = []string{"list", "watch", "get"}

// discovered is what one discovery found: the resources holding templates,
// at their preferred versions, and the groups discovery could not read
// (whose resources are kept as they are, never reported gone).
type discovered struct {
	resources map[schema.GroupResource]served
	failed    map[string]bool
}

// discover asks the API server for every resource that holds templates:
// one version per group-resource (the preferred one), no subresources,
// listable, watchable and gettable, excluded groups left out.
func discover(ctx context.Context, client discovery.DiscoveryInterface) (discovered, error) {
	lists, err := discovery.ServerPreferredResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(client))
	out := discovered{resources: map[schema.GroupResource]served{}, failed: map[string]bool{}}
	if err != nil {
		var partial *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &partial) {
			return out, fmt.Errorf("discover the API server's resources: %w", err)
		}
		for gv := range partial.Groups {
			out.failed[gv.Group] = true
		}
	}
	for _, list := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: templateVerbs}, lists) {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			gr := gv.WithResource(r.Name).GroupResource()
			if strings.Contains(r.Name, "/") || r.Kind == "" || excludedResource(gr) {
				continue
			}
			out.resources[gr] = served{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced}
		}
	}
	return out, nil
}

// crdView is what discovery must show of one CRD, from the CRD itself.
type crdView struct {
	gr schema.GroupResource
	// version is the version discovery must serve the resource in (the
	// served version of highest priority, as discovery sorts them), or ""
	// if it must not be served (not Established, or no version served).
	version string
	// terminating CRDs may be in discovery or not.
	terminating bool
}

func viewOf(crd *apiextensionsv1.CustomResourceDefinition) crdView {
	v := crdView{gr: schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}, terminating: crd.DeletionTimestamp != nil}
	if !established(crd) {
		return v
	}
	for _, ver := range crd.Spec.Versions {
		if ver.Served && (v.version == "" || version.CompareKubeAwareVersionStrings(ver.Name, v.version) > 0) {
			v.version = ver.Name
		}
	}
	return v
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// signature is what of a CRD discovery depends on: a change of anything
// else (its schema, stored versions) needs no new discovery.
func signature(crd *apiextensionsv1.CustomResourceDefinition) string {
	v := viewOf(crd)
	var served []string
	for _, ver := range crd.Spec.Versions {
		if ver.Served {
			served = append(served, ver.Name)
		}
	}
	slices.Sort(served)
	return fmt.Sprintf("%s %s %s %s %s %t %v", v.gr, crd.Spec.Names.Kind, crd.Spec.Scope, v.version, strings.Join(served, ","), v.terminating, established(crd))
}

// agrees reports whether discovery d already shows what the CRDs say:
// the API server updates its discovery a moment after a CRD changes.
// everCRD holds the resources of every CRD seen so far, which must be out
// of discovery once their CRD is gone.
func agrees(d discovered, crds []crdView, everCRD map[schema.GroupResource]bool) bool {
	present := map[schema.GroupResource]bool{}
	for _, c := range crds {
		present[c.gr] = true
		if c.terminating || excludedResource(c.gr) || d.failed[c.gr.Group] {
			continue
		}
		got, ok := d.resources[c.gr]
		if c.version == "" && ok || c.version != "" && (!ok || got.gvr.Version != c.version) {
			return false
		}
	}
	for gr := range everCRD {
		if _, ok := d.resources[gr]; ok && !present[gr] {
			return false
		}
	}
	return true
}
