package hubapi

import (
	"errors"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resources lists the resources of the CRDs of a scope ("" for any), at
// their storage version.
func resources(all []*apiextensionsv1.CustomResourceDefinition, scope apiextensionsv1.ResourceScope) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, crd := range all {
		if scope != "" && crd.Spec.Scope != scope {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				out = append(out, schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural})
			}
		}
	}
	return out
}

// eachResource calls f for every resource at once and joins the errors.
func eachResource(resources []schema.GroupVersionResource, f func(schema.GroupVersionResource) error) error {
	errs := make([]error, len(resources))
	var wg sync.WaitGroup
	for i, gvr := range resources {
		wg.Go(func() { errs[i] = f(gvr) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
