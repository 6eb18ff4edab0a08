// Package status aggregates what agents report on Works into the bindings
// (status.aggregatedStatus and the FullyApplied condition) and into the
// templates (their status summed over clusters, e.g. a Deployment's
// readyReplicas), so users read a workload's health on the hub.
package status

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

// Controller aggregates status.
type Controller struct {
	objs            *objects.Objects
	recorder        controller.Recorder
	logger          *slog.Logger
	bindings        *controller.Informer[v1alpha1.ResourceBinding, *v1alpha1.ResourceBinding]
	clusterBindings *controller.Informer[v1alpha1.ClusterResourceBinding, *v1alpha1.ClusterResourceBinding]
	works           *controller.Informer[v1alpha1.Work, *v1alpha1.Work]
	clusters        controller.Source[*v1alpha1.Cluster]
	queue           *controller.Queue
}

// New returns a status controller over objs; clusters is the hub's
// shared cluster informer.
func New(objs *objects.Objects, clusters controller.Source[*v1alpha1.Cluster], recorder controller.Recorder, logger *slog.Logger) *Controller {
	c := &Controller{objs: objs, recorder: recorder, logger: logger.With("controller", "status")}
	c.bindings = controller.NewInformer(objs.Bindings, nil, logger)
	c.clusterBindings = controller.NewInformer(objs.ClusterBindings, nil, logger)
	c.works = controller.NewInformer(objs.Works, nil, logger)
	c.clusters = clusters
	c.queue = controller.NewQueue("status", c.reconcile, logger)
	// A cluster going silent or coming back changes its health column.
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if old != nil && cur != nil && Reachable(old) == Reachable(cur) {
			return
		}
		c.requeueOn(controller.Subject(old, cur).Name)
	})
	c.bindings.AddHandler(func(_, cur *v1alpha1.ResourceBinding) {
		if cur != nil {
			c.queue.Add(controller.Key(cur.Namespace, cur.Name))
		}
	})
	c.clusterBindings.AddHandler(func(_, cur *v1alpha1.ClusterResourceBinding) {
		if cur != nil {
			c.queue.Add(cur.Name)
		}
	})
	c.works.AddHandler(func(old, cur *v1alpha1.Work) {
		if owner := controller.Subject(old, cur).Annotations[v1alpha1.AnnotationWorkBinding]; owner != "" {
			c.queue.Add(owner)
		}
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.works, c.bindings, c.clusterBindings, c.clusters) {
		return
	}
	c.queue.Run(ctx, workers)
}

// Reachable reports whether a cluster's agent is heard from: its Ready
// condition is not Unknown.
func Reachable(cl *v1alpha1.Cluster) bool {
	cond := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady)
	return cond == nil || cond.Status != metav1.ConditionUnknown
}

// requeueOn queues the bindings placed on cluster.
func (c *Controller) requeueOn(cluster string) {
	for _, b := range c.bindings.List() {
		if slices.ContainsFunc(b.Spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	}
	for _, b := range c.clusterBindings.List() {
		if slices.ContainsFunc(b.Spec.Clusters, func(tc v1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
			c.queue.Add(b.Name)
		}
	}
}

// reachable reports whether the named cluster is reachable; an unknown
// cluster is not.
func (c *Controller) reachable(cluster string) bool {
	cl := c.clusters.Get(cluster)
	return cl != nil && Reachable(cl)
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	workOf := func(bindingName string) func(string) *v1alpha1.Work {
		workName := binding.WorkName(key, bindingName)
		return func(cluster string) *v1alpha1.Work {
			return c.works.Get(controller.Key(v1alpha1.ExecutionNamespace(cluster), workName))
		}
	}
	if namespace, name, namespaced := strings.Cut(key, "/"); namespaced {
		return update(ctx, c, c.objs.Bindings, namespace, name, workOf(name), func(b *v1alpha1.ResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
			return &b.Spec, &b.Status
		})
	}
	return update(ctx, c, c.objs.ClusterBindings, "", key, workOf(key), func(b *v1alpha1.ClusterResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
		return &b.Spec, &b.Status
	})
}

// update stores a binding's aggregated status and its template's status.
func update[T any, PT store.Object[T]](ctx context.Context, c *Controller, r *store.Resource[T, PT], namespace, name string,
	workOf func(string) *v1alpha1.Work, parts func(PT) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus)) error {
	stored, err := r.Get(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	spec, status := parts(stored)
	items := Aggregate(spec, workOf, c.reachable)
	changed := !equality.Semantic.DeepEqual(status.AggregatedStatus, items)
	status.AggregatedStatus = items
	before := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionFullyApplied)
	wasApplied := before != nil && before.Status == metav1.ConditionTrue
	cond := fullyApplied(items, stored.GetGeneration())
	if meta.SetStatusCondition(&status.Conditions, cond) {
		changed = true
	}
	if changed {
		if _, err := r.Update(ctx, stored); err != nil {
			return fmt.Errorf("store status of binding %s: %w", controller.Key(namespace, name), err)
		}
		ref := controller.BindingRef(stored)
		switch {
		case cond.Status == metav1.ConditionTrue && !wasApplied:
			c.recorder.Event(ref, corev1.EventTypeNormal, "FullyApplied", cond.Message)
		case cond.Reason == v1alpha1.ReasonFullyAppliedFailed && (before == nil || before.Message != cond.Message):
			c.recorder.Event(ref, corev1.EventTypeWarning, "ApplyFailed", cond.Message)
		}
	}
	return c.updateTemplate(ctx, spec, items)
}

// updateTemplate writes the summed status on a workload template.
func (c *Controller) updateTemplate(ctx context.Context, spec *v1alpha1.ResourceBindingSpec, items []v1alpha1.AggregatedStatusItem) error {
	if spec.Replicas == 0 {
		return nil // not a workload: nothing to sum
	}
	ref := spec.Resource
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	r := c.objs.Template(gv.WithKind(ref.Kind).GroupKind(), ref.Namespace != "")
	u, err := r.Get(ctx, ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := summedStatus(items)
	if want == nil {
		// No cluster reports (none placed, or none applied yet): old sums
		// must not linger as if replicas were still ready somewhere.
		want = map[string]any{}
	}
	want["observedGeneration"] = u.GetGeneration()
	current, _, _ := unstructured.NestedMap(u.Object, "status")
	if equality.Semantic.DeepEqual(current, want) {
		return nil
	}
	u.Object["status"] = want
	if _, err := r.Update(ctx, u); err != nil {
		return fmt.Errorf("store status of template %s %s: %w", ref.Kind, controller.Key(ref.Namespace, ref.Name), err)
	}
	return nil
}
