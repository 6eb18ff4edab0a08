// Package detector matches resource templates to propagation policies and
// keeps exactly one binding per matched template in step with both: a
// ResourceBinding for a namespaced template, a ClusterResourceBinding for a
// cluster-scoped one.
//
// It reads templates, policies and bindings from the hub's shared
// informers and writes bindings' spec and metadata through the API server
// (Update, so a concurrent write of the same binding is a Conflict and the
// template is reconciled again once the informer has the new binding); a
// binding's status is not the detector's. The scheduler's result, the
// eviction tasks and spec.rescheduleTriggeredAt are kept as they are.
package detector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/hub/templateclient"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/workload"
)

// Detector is the controller.
type Detector struct {
	clients         *kube.Clients
	writer          *templateclient.Writer
	recorder        controller.Recorder
	logger          *slog.Logger
	templates       controller.Source[*unstructured.Unstructured]
	policies        *controller.Shared[*v1alpha1.PropagationPolicy]
	clusterPolicies *controller.Shared[*v1alpha1.ClusterPropagationPolicy]
	bindings        *controller.Shared[*v1alpha1.ResourceBinding]
	clusterBindings *controller.Shared[*v1alpha1.ClusterResourceBinding]
	queue           *controller.Queue
	// place, when set, is the scheduler's placement of a new binding.
	place controller.Placer
}

// SetPlacer sets the scheduler's placement, with which a binding is
// created already placed (one write instead of the create and the
// scheduler's placement); call it before Run. Without one (unit tests),
// or when it has none, a binding is created unplaced and the scheduler
// places it.
func (d *Detector) SetPlacer(place controller.Placer) {
	d.place = place
}

// New returns a detector over the shared informers (informers.Templates
// must be set) and adds its handlers to them; Run runs it. The clock, the
// controllers' common argument, is unused: the detector decides nothing by
// time, and its retries back off in real time.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, _ clock.WithTicker, logger *slog.Logger) *Detector {
	d := &Detector{
		clients:         clients,
		writer:          templateclient.NewWriter(clients),
		recorder:        recorder,
		logger:          logger.With("controller", "detector"),
		templates:       informers.Templates,
		policies:        informers.Policies,
		clusterPolicies: informers.ClusterPolicies,
		bindings:        informers.Bindings,
		clusterBindings: informers.ClusterBindings,
	}
	d.queue = controller.NewQueue("detector", d.reconcile, logger)
	d.templates.AddHandler(func(old, cur *unstructured.Unstructured) {
		if matters(old, cur) {
			d.queue.Add(names.TemplateKey(controller.Subject(old, cur)))
		}
	})
	// A policy change can move any template it may select: requeue them.
	// Templates are few next to heartbeats, and reconciling an unchanged
	// one is a read of memory.
	d.policies.AddHandler(func(old, cur *v1alpha1.PropagationPolicy) {
		d.requeueTemplates(controller.Subject(old, cur).Namespace)
	})
	d.clusterPolicies.AddHandler(func(_, _ *v1alpha1.ClusterPropagationPolicy) { d.requeueTemplates(metav1.NamespaceAll) })
	// A binding deleted or changed by someone else is put right; at start,
	// a binding whose template went while the hub was down goes too.
	d.bindings.AddHandler(bindingHandler[*v1alpha1.ResourceBinding](d))
	d.clusterBindings.AddHandler(bindingHandler[*v1alpha1.ClusterResourceBinding](d))
	return d
}

// matters reports whether a template change can change its binding: not
// a status write (same generation, labels and deletion state), unless the
// kind has no generation to tell.
func matters(old, cur *unstructured.Unstructured) bool {
	switch {
	case old == nil || cur == nil:
		return true
	case cur.GetGeneration() == 0 || old.GetGeneration() != cur.GetGeneration():
		return true
	case old.GetUID() != cur.GetUID() || old.GetAPIVersion() != cur.GetAPIVersion():
		return true
	case (old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil):
		return true
	}
	return !maps.Equal(old.GetLabels(), cur.GetLabels())
}

// bindingHandler queues the template of a binding that was added, deleted,
// or had its spec or annotations changed.
func bindingHandler[PT interface {
	comparable
	metav1.Object
}](d *Detector) controller.Handler[PT] {
	return func(old, cur PT) {
		var zero PT
		obj := controller.Subject(old, cur)
		key := obj.GetAnnotations()[names.AnnotationTemplate]
		if key == "" {
			return
		}
		if old != zero && cur != zero && old.GetGeneration() == cur.GetGeneration() && maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) {
			return // a status write
		}
		d.queue.Add(key)
	}
}

// requeueTemplates queues the templates of namespace (all if empty).
func (d *Detector) requeueTemplates(namespace string) {
	select {
	case <-d.templates.Synced():
	default:
		return // the first list queues every template anyway
	}
	for _, u := range d.templates.List() {
		if namespace == metav1.NamespaceAll || u.GetNamespace() == namespace {
			d.queue.Add(names.TemplateKey(u))
		}
	}
}

// Run runs the detector until ctx ends, once every source has listed.
func (d *Detector) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, d.policies, d.clusterPolicies, d.bindings, d.clusterBindings, d.templates) {
		return
	}
	d.queue.Run(ctx, workers)
}

// reconcile brings the binding of one template in step.
func (d *Detector) reconcile(ctx context.Context, key string) error {
	gk, namespace, name, ok := names.ParseTemplateKey(key)
	if !ok {
		return nil
	}
	t := template{key: key, gk: gk, namespace: namespace, name: name}
	u := d.templates.Get(key)
	if u == nil || u.GetDeletionTimestamp() != nil {
		if namespace == "" {
			return removeBinding(ctx, d, d.clusterBindingAPI(), t)
		}
		return removeBinding(ctx, d, d.bindingAPI(namespace), t)
	}
	winner := d.match(u)
	if winner == nil {
		// Like Karmada: a policy deleted (or a template relabelled) leaves
		// what was propagated in place; only deleting the template removes
		// it from the clusters. A new matching policy takes the binding over.
		d.logger.Debug("no policy matches the template; its binding, if any, is kept", "template", key)
		return nil
	}
	objMeta := metav1.ObjectMeta{Name: names.BindingName(name, gk.Kind), Namespace: namespace,
		Annotations: map[string]string{names.AnnotationPolicy: winner.name, names.AnnotationTemplate: key}}
	want := bindingSpec(u, winner)
	if namespace == "" {
		return syncBinding(ctx, d, d.clusterBindingAPI(), u, objMeta, want)
	}
	return syncBinding(ctx, d, d.bindingAPI(namespace), u, objMeta, want)
}

// template names the template a reconcile is about.
type template struct {
	key             string
	gk              schema.GroupKind
	namespace, name string
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
		for _, p := range d.policies.ByIndex(cache.NamespaceIndex, u.GetNamespace()) {
			consider(&candidate{namespaced: true, priority: priorityOf(&p.Spec), specificity: specificity(&p.Spec, u),
				name: p.Namespace + "/" + p.Name, spec: &p.Spec, meta: p})
		}
	}
	for _, p := range d.clusterPolicies.List() {
		consider(&candidate{priority: priorityOf(&p.Spec), specificity: specificity(&p.Spec, u), name: p.Name, spec: &p.Spec, meta: p})
	}
	return best
}

// bindingSpec is what the detector owns of a binding's spec.
func bindingSpec(u *unstructured.Unstructured, c *candidate) v1alpha1.ResourceBindingSpec {
	return v1alpha1.ResourceBindingSpec{
		Resource: v1alpha1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(),
			Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()},
		ReplicaRequirements: workload.Requirements(u),
		Replicas:            workload.Replicas(u),
		Placement:           c.spec.Placement.DeepCopy(),
		Failover:            c.spec.Failover.DeepCopy(),
		ConflictResolution:  c.spec.ConflictResolution,
		SchedulerName:       c.spec.SchedulerName,
	}
}

// bindingObject is a ResourceBinding or a ClusterResourceBinding.
type bindingObject interface {
	comparable
	metav1.Object
}

// bindingAPI reaches the bindings of one kind (and namespace): the shared
// informer for reads, the typed client for writes.
type bindingAPI[PT bindingObject] struct {
	cached func(name string) PT
	get    func(ctx context.Context, name string) (PT, error)
	create func(ctx context.Context, obj PT) error
	update func(ctx context.Context, obj PT) error
	delete func(ctx context.Context, name string, opts metav1.DeleteOptions) error
	build  func(objMeta metav1.ObjectMeta, spec v1alpha1.ResourceBindingSpec) PT
	spec   func(PT) *v1alpha1.ResourceBindingSpec
	copy   func(PT) PT
}

func (d *Detector) bindingAPI(namespace string) bindingAPI[*v1alpha1.ResourceBinding] {
	client := d.clients.Flotilla.FlotillaV1alpha1().ResourceBindings(namespace)
	return bindingAPI[*v1alpha1.ResourceBinding]{
		cached: func(name string) *v1alpha1.ResourceBinding { return d.bindings.Get(controller.Key(namespace, name)) },
		get: func(ctx context.Context, name string) (*v1alpha1.ResourceBinding, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		create: func(ctx context.Context, b *v1alpha1.ResourceBinding) error {
			_, err := client.Create(ctx, b, metav1.CreateOptions{FieldManager: controller.FieldManager})
			return err
		},
		update: func(ctx context.Context, b *v1alpha1.ResourceBinding) error {
			_, err := client.Update(ctx, b, metav1.UpdateOptions{FieldManager: controller.FieldManager})
			return err
		},
		delete: client.Delete,
		build: func(objMeta metav1.ObjectMeta, spec v1alpha1.ResourceBindingSpec) *v1alpha1.ResourceBinding {
			return &v1alpha1.ResourceBinding{ObjectMeta: objMeta, Spec: spec}
		},
		spec: func(b *v1alpha1.ResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec },
		copy: (*v1alpha1.ResourceBinding).DeepCopy,
	}
}

func (d *Detector) clusterBindingAPI() bindingAPI[*v1alpha1.ClusterResourceBinding] {
	client := d.clients.Flotilla.FlotillaV1alpha1().ClusterResourceBindings()
	return bindingAPI[*v1alpha1.ClusterResourceBinding]{
		cached: d.clusterBindings.Get,
		get: func(ctx context.Context, name string) (*v1alpha1.ClusterResourceBinding, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		create: func(ctx context.Context, b *v1alpha1.ClusterResourceBinding) error {
			_, err := client.Create(ctx, b, metav1.CreateOptions{FieldManager: controller.FieldManager})
			return err
		},
		update: func(ctx context.Context, b *v1alpha1.ClusterResourceBinding) error {
			_, err := client.Update(ctx, b, metav1.UpdateOptions{FieldManager: controller.FieldManager})
			return err
		},
		delete: client.Delete,
		build: func(objMeta metav1.ObjectMeta, spec v1alpha1.ResourceBindingSpec) *v1alpha1.ClusterResourceBinding {
			return &v1alpha1.ClusterResourceBinding{ObjectMeta: objMeta, Spec: spec}
		},
		spec: func(b *v1alpha1.ClusterResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec },
		copy: (*v1alpha1.ClusterResourceBinding).DeepCopy,
	}
}

// syncBinding creates the binding or updates the detector's part of its
// spec and its two annotations, keeping the scheduler's result, eviction
// tasks, other annotations and status. The API server bumps the
// generation whenever the spec changes.
func syncBinding[PT bindingObject](ctx context.Context, d *Detector, api bindingAPI[PT], u *unstructured.Unstructured,
	objMeta metav1.ObjectMeta, want v1alpha1.ResourceBindingSpec) error {
	var zero PT
	bindingKey := controller.Key(objMeta.Namespace, objMeta.Name)
	stored := api.cached(objMeta.Name)
	if stored == zero {
		if d.place != nil {
			if clusters, ok := d.place(bindingKey, 1, &want, &v1alpha1.ResourceBindingStatus{}); ok {
				want.Clusters = clusters
			}
		}
		err := api.create(ctx, api.build(objMeta, want))
		if err == nil {
			d.logger.Info("binding created", "binding", bindingKey, "policy", objMeta.Annotations[names.AnnotationPolicy])
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create binding %s: %w", bindingKey, err)
		}
		// The informer has not seen it yet.
		if stored, err = api.get(ctx, objMeta.Name); err != nil {
			return fmt.Errorf("get binding %s: %w", bindingKey, err)
		}
	}
	templateKey := objMeta.Annotations[names.AnnotationTemplate]
	if owner := stored.GetAnnotations()[names.AnnotationTemplate]; owner != templateKey {
		// Two templates whose names and kinds give the same binding name
		// (kinds of different groups): the first keeps it.
		d.logger.Error("binding name taken by another template; this template is not propagated",
			"binding", bindingKey, "owner", owner, "template", templateKey)
		d.recorder.Event(templateRef(u), corev1.EventTypeWarning, "BindingNameTaken",
			fmt.Sprintf("binding %s belongs to %s; this template is not propagated", bindingKey, owner))
		return nil
	}
	spec := api.spec(stored)
	want = normalized(want)
	want.Clusters, want.GracefulEvictionTasks, want.RescheduleTriggeredAt = spec.Clusters, spec.GracefulEvictionTasks, spec.RescheduleTriggeredAt
	sameSpec := equality.Semantic.DeepEqual(withoutRV(*spec), withoutRV(want))
	samePolicy := stored.GetAnnotations()[names.AnnotationPolicy] == objMeta.Annotations[names.AnnotationPolicy]
	if sameSpec && samePolicy {
		return nil
	}
	obj := api.copy(stored)
	*api.spec(obj) = want
	annotations := maps.Clone(obj.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, objMeta.Annotations)
	obj.SetAnnotations(annotations)
	if err := api.update(ctx, obj); err != nil {
		return fmt.Errorf("update binding %s: %w", bindingKey, err)
	}
	if !samePolicy {
		d.logger.Info("binding moved to another policy", "binding", bindingKey, "policy", objMeta.Annotations[names.AnnotationPolicy])
	}
	return nil
}

// normalized is spec as the API server returns it (empty lists and maps
// dropped), so that comparing it with a stored spec finds real changes only.
func normalized(spec v1alpha1.ResourceBindingSpec) v1alpha1.ResourceBindingSpec {
	raw, err := json.Marshal(spec)
	if err != nil {
		return spec
	}
	var out v1alpha1.ResourceBindingSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		return spec
	}
	return out
}

// withoutRV drops the template's resourceVersion, which changes on every
// status write, so only real template changes update the binding.
func withoutRV(s v1alpha1.ResourceBindingSpec) v1alpha1.ResourceBindingSpec {
	s.Resource.ResourceVersion = ""
	return s
}

// removeBinding deletes the binding of a template that is gone (or being
// deleted), if the detector made it for that template. The informers may
// lag: the binding missing from one is looked up in the API server, and
// the template is confirmed gone there before its binding is deleted.
func removeBinding[PT bindingObject](ctx context.Context, d *Detector, api bindingAPI[PT], t template) error {
	var zero PT
	name := names.BindingName(t.name, t.gk.Kind)
	bindingKey := controller.Key(t.namespace, name)
	stored := api.cached(name)
	if stored == zero {
		var err error
		stored, err = api.get(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get binding %s: %w", bindingKey, err)
		}
	}
	if stored.GetAnnotations()[names.AnnotationTemplate] != t.key {
		return nil
	}
	u, err := d.writer.Get(ctx, t.gk, t.namespace, t.name)
	switch {
	case err == nil && u.GetDeletionTimestamp() == nil:
		d.logger.Debug("template not in the informer yet; its binding is kept", "template", t.key)
		return nil
	case err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return fmt.Errorf("check template %s: %w", t.key, err)
	}
	uid := stored.GetUID()
	err = api.delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete binding %s: %w", bindingKey, err)
	}
	d.logger.Info("binding deleted", "binding", bindingKey, "template", t.key)
	return nil
}

// templateRef names a template in events.
func templateRef(u *unstructured.Unstructured) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()}
}
