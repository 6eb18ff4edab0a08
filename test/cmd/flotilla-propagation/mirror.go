package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// mirror holds the bindings and Deployments of the bench namespace and
// every Work in memory, from one watch each, so that the set-up can check
// its counts every 20 ms without listing thousands of objects from the hub
// each time: such lists cost the hub more CPU than the pipeline being
// measured (an earlier version of this tool did that).
type mirror struct {
	bindings, works, deployments cache.Store
}

var (
	bindingsGVR    = schema.GroupVersionResource{Group: "flotilla.io", Version: "v1alpha1", Resource: "resourcebindings"}
	worksGVR       = schema.GroupVersionResource{Group: "flotilla.io", Version: "v1alpha1", Resource: "works"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// startMirror starts the watches and waits for their first lists; they
// stop with ctx.
func startMirror(ctx context.Context, dyn dynamic.Interface) (*mirror, error) {
	bench := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "bench", nil)
	all := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	bindings := bench.ForResource(bindingsGVR).Informer()
	deployments := bench.ForResource(deploymentsGVR).Informer()
	works := all.ForResource(worksGVR).Informer()
	bench.Start(ctx.Done())
	all.Start(ctx.Done())
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), bindings.HasSynced, deployments.HasSynced, works.HasSynced) {
		return nil, fmt.Errorf("watches of bindings, Works and Deployments: not listed within a minute")
	}
	return &mirror{bindings: bindings.GetStore(), works: works.GetStore(), deployments: deployments.GetStore()}, nil
}

// count is how many objects of store satisfy ok.
func count(store cache.Store, ok func(*unstructured.Unstructured) bool) int {
	n := 0
	for _, obj := range store.List() {
		if u, isU := obj.(*unstructured.Unstructured); isU && ok(u) {
			n++
		}
	}
	return n
}

// scheduled counts the bindings with clusters.
func (m *mirror) scheduled() int {
	return count(m.bindings, func(u *unstructured.Unstructured) bool {
		clusters, _, _ := unstructured.NestedSlice(u.Object, "spec", "clusters")
		return len(clusters) > 0
	})
}

// applied counts the Works whose agent applied their current generation.
func (m *mirror) applied() int {
	return count(m.works, func(u *unstructured.Unstructured) bool {
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return observed == u.GetGeneration() && conditionTrue(u, "Applied")
	})
}

// ready counts the Deployments labelled bench=group with replicas ready.
func (m *mirror) ready(group string, replicas int64) int {
	return count(m.deployments, func(u *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		return u.GetLabels()["bench"] == group && n == replicas
	})
}

func conditionTrue(u *unstructured.Unstructured, kind string) bool {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok && m["type"] == kind && m["status"] == "True" {
			return true
		}
	}
	return false
}
