// Package detector matches resource templates to propagation policies and
// keeps exactly one binding per matched template in step with both: a
// ResourceBinding for a namespaced template, a ClusterResourceBinding for a
// cluster-scoped one.
package detector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/internal/workload"
	"github.com/flotilla-io/flotilla/store"
)

// Annotations the detector puts on bindings.
const (
	AnnotationPolicy   = "flotilla.io/policy"
	AnnotationTemplate = "flotilla.io/template"
)

// TemplateKey names a template across kinds: GROUP/KIND/NAMESPACE/NAME.
func TemplateKey(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	return gk.Group + "/" + gk.Kind + "/" + u.GetNamespace() + "/" + u.GetName()
}

// BindingName is the name of a template's binding: NAME-KIND.
func BindingName(name, kind string) string {
	return name + "-" + strings.ToLower(kind)
}

// Detector is the controller.
type Detector struct {
	objs            *objects.Objects
	logger          *slog.Logger
	templates       *controller.Informer[unstructured.Unstructured, *unstructured.Unstructured]
	policies        *controller.Informer[v1alpha1.PropagationPolicy, *v1alpha1.PropagationPolicy]
	clusterPolicies *controller.Informer[v1alpha1.ClusterPropagationPolicy, *v1alpha1.ClusterPropagationPolicy]
	queue           *controller.Queue
}

// New returns a detector over objs.
func New(objs *objects.Objects, logger *slog.Logger) *Detector {
	d := &Detector{objs: objs, logger: logger.With("controller", "detector")}
	d.templates = controller.NewInformer(objs.Templates, TemplateKey, logger)
	d.policies = controller.NewInformer(objs.Policies, nil, logger)
	d.clusterPolicies = controller.NewInformer(objs.ClusterPolicies, nil, logger)
	d.queue = controller.NewQueue("detector", d.reconcile, logger)
	d.templates.AddHandler(func(old, cur *unstructured.Unstructured) {
		if old != nil && cur != nil && old.GetGeneration() == cur.GetGeneration() {
			return // a status write: nothing the binding depends on
		}
		if cur != nil {
			d.queue.Add(TemplateKey(cur))
		} else {
			d.queue.Add(TemplateKey(old))
		}
	})
	// A policy change can move any template: requeue them all. Templates
	// are few next to heartbeats, and reconciling an unchanged one is a
	// read of memory.
	d.policies.AddHandler(func(_, _ *v1alpha1.PropagationPolicy) { d.requeueAll() })
	d.clusterPolicies.AddHandler(func(_, _ *v1alpha1.ClusterPropagationPolicy) { d.requeueAll() })
	return d
}

func (d *Detector) requeueAll() {
	select {
	case <-d.templates.Synced():
	default:
		return // the initial list queues every template anyway
	}
	for _, u := range d.templates.List() {
		d.queue.Add(TemplateKey(u))
	}
}

// Run runs the detector until ctx ends.
func (d *Detector) Run(ctx context.Context, workers int) {
	go d.policies.Run(ctx)
	go d.clusterPolicies.Run(ctx)
	for _, synced := range []<-chan struct{}{d.policies.Synced(), d.clusterPolicies.Synced()} {
		select {
		case <-synced:
		case <-ctx.Done():
			return
		}
	}
	// Templates start last, so their first reconcile sees every policy.
	go d.templates.Run(ctx)
	d.queue.Run(ctx, workers)
}

// reconcile brings the binding of one template in step.
func (d *Detector) reconcile(ctx context.Context, key string) error {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) != 4 {
		return nil
	}
	kind, namespace, name := parts[1], parts[2], parts[3]
	bindingName := BindingName(name, kind)
	u := d.templates.Get(key)
	var winner *candidate
	if u != nil {
		winner = d.match(u)
	}
	switch {
	case u == nil:
		return d.removeBinding(ctx, namespace, bindingName, key)
	case winner == nil:
		// Like Karmada: a policy deleted (or a template relabelled) leaves
		// what was propagated in place; only deleting the template removes
		// it from the clusters. A new matching policy takes the binding over.
		d.logger.Debug("no policy matches the template; its binding, if any, is kept", "template", key)
		return nil
	}
	spec := bindingSpec(u, winner)
	meta := metav1.ObjectMeta{Name: bindingName, Namespace: namespace,
		Annotations: map[string]string{AnnotationPolicy: winner.name, AnnotationTemplate: key}}
	if namespace == "" {
		return syncBinding(ctx, d.objs.ClusterBindings, meta, spec, d.logger, func(b *v1alpha1.ClusterResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec })
	}
	return syncBinding(ctx, d.objs.Bindings, meta, spec, d.logger, func(b *v1alpha1.ResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec })
}

// match returns the winning policy of a template, or nil.
func (d *Detector) match(u *unstructured.Unstructured) *candidate {
	var best *candidate
	consider := func(c *candidate) {
		if c.specificity != noMatch && (best == nil || better(c, best)) {
			best = c
		}
	}
	if u.GetNamespace() != "" {
		for _, p := range d.policies.List() {
			if p.Namespace == u.GetNamespace() {
				consider(&candidate{namespaced: true, priority: priorityOf(&p.Spec), specificity: specificity(&p.Spec, u),
					name: p.Namespace + "/" + p.Name, spec: &p.Spec, meta: p})
			}
		}
	}
	for _, p := range d.clusterPolicies.List() {
		consider(&candidate{priority: priorityOf(&p.Spec), specificity: specificity(&p.Spec, u), name: p.Name, spec: &p.Spec, meta: p})
	}
	return best
}

// bindingSpec is what the detector owns of a binding's spec.
func bindingSpec(u *unstructured.Unstructured, c *candidate) v1alpha1.ResourceBindingSpec {
	placement := c.spec.Placement.DeepCopy()
	return v1alpha1.ResourceBindingSpec{
		Resource: v1alpha1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(),
			Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
		ReplicaRequirements: workload.Requirements(u),
		Replicas:            workload.Replicas(u),
		Placement:           placement,
		Failover:            c.spec.Failover.DeepCopy(),
		ConflictResolution:  c.spec.ConflictResolution,
		SchedulerName:       c.spec.SchedulerName,
	}
}

// syncBinding creates the binding or updates the detector's part of its
// spec, keeping the scheduler's result, eviction tasks and status. The
// generation grows whenever the spec changes.
func syncBinding[T any, PT store.Object[T]](ctx context.Context, r *store.Resource[T, PT], meta metav1.ObjectMeta,
	want v1alpha1.ResourceBindingSpec, logger *slog.Logger, specOf func(PT) *v1alpha1.ResourceBindingSpec) error {
	stored, err := r.Get(ctx, meta.Namespace, meta.Name)
	if apierrors.IsNotFound(err) {
		obj := PT(new(T))
		obj.SetNamespace(meta.Namespace)
		obj.SetName(meta.Name)
		obj.SetAnnotations(meta.Annotations)
		obj.SetGeneration(1)
		*specOf(obj) = want
		if _, err := r.Create(ctx, obj); err != nil {
			return fmt.Errorf("create binding %s: %w", controller.Key(meta.Namespace, meta.Name), err)
		}
		logger.Info("binding created", "binding", controller.Key(meta.Namespace, meta.Name), "policy", meta.Annotations[AnnotationPolicy])
		return nil
	}
	if err != nil {
		return err
	}
	if owner := stored.GetAnnotations()[AnnotationTemplate]; owner != meta.Annotations[AnnotationTemplate] {
		// Two templates whose names and kinds give the same binding name
		// (kinds of different groups): the first keeps it.
		logger.Error("binding name taken by another template; this template is not propagated",
			"binding", controller.Key(meta.Namespace, meta.Name), "owner", owner, "template", meta.Annotations[AnnotationTemplate])
		return nil
	}
	spec := specOf(stored)
	want.Clusters, want.GracefulEvictionTasks, want.RescheduleTriggeredAt = spec.Clusters, spec.GracefulEvictionTasks, spec.RescheduleTriggeredAt
	sameSpec := equality.Semantic.DeepEqual(withoutRV(*spec), withoutRV(want))
	if sameSpec && equality.Semantic.DeepEqual(stored.GetAnnotations(), meta.Annotations) {
		return nil
	}
	if !sameSpec {
		stored.SetGeneration(stored.GetGeneration() + 1)
	}
	*spec = want
	stored.SetAnnotations(meta.Annotations)
	if _, err := r.Update(ctx, stored); err != nil {
		return fmt.Errorf("update binding %s: %w", controller.Key(meta.Namespace, meta.Name), err)
	}
	return nil
}

// withoutRV drops the template's resourceVersion, which changes on every
// status write, so only real template changes bump the generation.
func withoutRV(s v1alpha1.ResourceBindingSpec) v1alpha1.ResourceBindingSpec {
	s.Resource.ResourceVersion = ""
	return s
}

// removeBinding deletes the binding of a template that is gone or no
// longer matched, if the detector made it for that template.
func (d *Detector) removeBinding(ctx context.Context, namespace, name, templateKey string) error {
	if namespace == "" {
		return removeTyped(ctx, d.objs.ClusterBindings, "", name, templateKey, d.logger)
	}
	return removeTyped(ctx, d.objs.Bindings, namespace, name, templateKey, d.logger)
}

func removeTyped[T any, PT store.Object[T]](ctx context.Context, r *store.Resource[T, PT], namespace, name, templateKey string, logger *slog.Logger) error {
	stored, err := r.Get(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if stored.GetAnnotations()[AnnotationTemplate] != templateKey {
		return nil
	}
	if err := r.Delete(ctx, namespace, name); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete binding %s: %w", controller.Key(namespace, name), err)
	}
	logger.Info("binding deleted", "binding", controller.Key(namespace, name), "template", templateKey)
	return nil
}
