// Package binding is the binding controller: it renders each binding's
// template into one Work per target cluster (replicas revised when the
// binding divides them), keeps the Works of clusters that are being
// evicted, and deletes every other Work of the binding. A deleted Work
// stays, with its deletionTimestamp set, until the agent confirms its
// objects are gone: every Work the hub creates carries the finalizer
// v1alpha1.WorkFinalizer, which the dispatcher removes then.
//
// A deletionTimestamp cannot be cleared: a Work wanted again while it is
// being deleted is created anew once the old one is gone (its delete event
// requeues the binding), with generation 1.
//
// purgeMode Directly (directly.go): the Work of a cluster the binding left
// is deleted first, and no Work of the binding is created or updated until
// that copy is confirmed gone, stopped by fencing, or given up with its
// Cluster. The copy in the new cluster then carries the labels the last
// eviction task preserved (eviction.InjectedLabels).
package binding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Controller renders Works.
type Controller struct {
	clients         *kube.Clients
	recorder        controller.Recorder
	logger          *slog.Logger
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	templates       controller.Source[*unstructured.Unstructured]
	works           *controller.Shared[*v1alpha1.Work]
	clusters        controller.Source[*v1alpha1.Cluster]
	queue           *controller.Queue
	clock           clock.PassiveClock

	// namespaces are the execution namespaces known to exist.
	namespaces sync.Map

	mu sync.Mutex
	// written holds the Works as the controller last wrote them, by key,
	// until the informer has them: the next reconcile builds on its own
	// last write, not on an older version that would only conflict.
	written map[string]*v1alpha1.Work
	// waitingSince is when the new copies of each binding that waits for
	// an old copy (directly.go) began to wait.
	waitingSince map[string]time.Time
	waitObserver WaitObserver
}

// New returns a binding controller that reads bindings, templates and
// Works from informers and writes Works (and their namespaces) through
// clients. It adds its handlers to the shared informers; Run starts it.
// The clock tells when fencing has stopped an old copy (directly.go).
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.PassiveClock, logger *slog.Logger) *Controller {
	c := &Controller{clients: clients, recorder: recorder, logger: logger.With("controller", "binding"),
		bindings: informers.Bindings, clusterBindings: informers.ClusterBindings, templates: informers.Templates, works: informers.Works,
		clusters: informers.Clusters, clock: clk, written: map[string]*v1alpha1.Work{}, waitingSince: map[string]time.Time{}}
	c.queue = controller.NewQueue("binding", c.reconcile, logger)
	// Status writes (the scheduler's and the status controller's, every few
	// seconds during a rollout) change nothing a Work is rendered from:
	// only spec changes of bindings requeue them.
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		if old == nil || cur == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
			b := controller.Subject(old, cur)
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		if old == nil || cur == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
			c.queue.Add(controller.Subject(old, cur).Name)
		}
	})
	c.templates.AddHandler(func(old, cur *unstructured.Unstructured) {
		if old != nil && cur != nil && !renderedChanged(old, cur) {
			return
		}
		u := controller.Subject(old, cur)
		c.queue.Add(controller.Key(u.GetNamespace(), names.BindingName(u.GetName(), u.GetKind())))
	})
	// A Work changed or lost behind the controller's back is fixed, and a
	// Work wanted again while it was being deleted is created once it is
	// gone. What the agents report (status) changes nothing here.
	c.works.AddHandler(func(old, cur *v1alpha1.Work) {
		c.caughtUp(old, cur)
		if old != nil && cur != nil && old.Generation == cur.Generation && (old.DeletionTimestamp == nil) == (cur.DeletionTimestamp == nil) &&
			maps.Equal(old.Annotations, cur.Annotations) && slices.Equal(old.Finalizers, cur.Finalizers) {
			return
		}
		if owner := controller.Subject(old, cur).Annotations[v1alpha1.AnnotationWorkBinding]; owner != "" {
			c.queue.Add(owner)
		}
	})
	// A cluster given up (deleted) no longer holds back the new copies of
	// the bindings that left it directly (directly.go).
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if old != nil && cur != nil && (old.DeletionTimestamp == nil) == (cur.DeletionTimestamp == nil) {
			return
		}
		c.requeueLeaving(controller.Subject(old, cur).Name)
	})
	return c
}

// requeueLeaving queues the bindings with an eviction task from cluster.
func (c *Controller) requeueLeaving(cluster string) {
	leaving := func(spec *v1alpha1.ResourceBindingSpec) bool {
		return slices.Contains(spec.EvictingClusters(), cluster)
	}
	for _, b := range c.bindings.List() {
		if leaving(&b.Spec) {
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	}
	for _, b := range c.clusterBindings.List() {
		if leaving(&b.Spec) {
			c.queue.Add(b.Name)
		}
	}
}

// renderedChanged reports whether a template changed in what its Works
// are rendered from: anything but its status and the metadata the API
// server sets. Not every kind has a generation (ConfigMaps do not), and
// labels and annotations never bump it.
func renderedChanged(old, cur *unstructured.Unstructured) bool {
	if !maps.Equal(old.GetLabels(), cur.GetLabels()) || !maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) {
		return true
	}
	for k, v := range cur.Object {
		if k != "metadata" && k != "status" && !equality.Semantic.DeepEqual(v, old.Object[k]) {
			return true
		}
	}
	for k := range old.Object {
		if _, ok := cur.Object[k]; !ok && k != "metadata" && k != "status" {
			return true
		}
	}
	return false
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Every informer must be complete before the first reconcile: a binding
	// not listed yet would look deleted, and its Works would be deleted.
	if !controller.StartAndSync(ctx, c.templates, c.works, c.bindings, c.clusterBindings, c.clusters) {
		return
	}
	c.queue.Run(ctx, workers)
}

// target is what one cluster should run for a binding.
type target struct {
	replicas int32
	// keep: the cluster is being evicted; its Work stays as it is.
	keep bool
}

// reconcile brings the Works of one binding in step.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	b, spec := c.binding(key)
	targets := map[string]target{}
	var template *unstructured.Unstructured
	if spec != nil {
		template = c.templates.Get(names.TemplateKeyOf(spec.Resource))
		for _, tc := range spec.Clusters {
			targets[tc.Name] = target{replicas: tc.Replicas}
		}
		// Directly: the old copy goes at once, before its replacement
		// runs (directly.go) — but not while no other cluster is placed:
		// never the last copy.
		for _, cluster := range eviction.ExistingClusters(spec) {
			if _, placed := targets[cluster]; !placed {
				targets[cluster] = target{keep: true}
			}
		}
	}
	if spec == nil || template == nil {
		// Deleting Works deletes workloads: make sure the binding or its
		// template is really gone from the API, not just late in an
		// informer.
		gone, err := c.confirmGone(ctx, key, spec)
		if err != nil || !gone {
			return err
		}
		clear(targets)
	}
	name := key
	if _, n, namespaced := strings.Cut(key, "/"); namespaced {
		name = n
	}
	src := &workSource{binding: b, key: key, workName: names.WorkName(key, name), template: template, spec: spec}
	var ensure []string
	for cluster, t := range targets {
		if !t.keep {
			ensure = append(ensure, cluster)
		}
	}
	if spec != nil && template != nil {
		now := c.clock.Now()
		if olds := c.oldCopies(ctx, src, now); len(olds) > 0 {
			// Nothing is created or updated meanwhile, as in Karmada: an
			// update could move replicas ahead of the old copy's end too.
			ensure = nil
			c.waitForOldCopies(src, olds, now)
			c.noteWaiting(key, now)
		} else {
			c.noteWaitOver(key, now, true)
		}
	} else {
		c.noteWaitOver(key, c.clock.Now(), false)
	}
	if err := forEach(ensure, func(cluster string) error {
		return c.ensureWork(ctx, src, cluster, targets[cluster].replicas)
	}); err != nil {
		return err
	}
	return c.deleteOthers(ctx, key, targets)
}

// parallelWrites bounds the writes of one reconcile in flight at once: a
// binding placed on many clusters has as many Works.
const parallelWrites = 8

// forEach runs fn for every item, parallelWrites at a time, and returns
// their errors joined.
func forEach[T any](items []T, fn func(T) error) error {
	if len(items) == 1 {
		return fn(items[0])
	}
	errs := make([]error, len(items))
	slots := make(chan struct{}, parallelWrites)
	var wg sync.WaitGroup
	for i, item := range items {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = fn(item)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// binding returns the binding with key and its spec, or nils if it is
// not in the informer.
func (c *Controller) binding(key string) (metav1.Object, *v1alpha1.ResourceBindingSpec) {
	if strings.Contains(key, "/") {
		if b := c.bindings.Get(key); b != nil {
			return b, &b.Spec
		}
		return nil, nil
	}
	if b := c.clusterBindings.Get(key); b != nil {
		return b, &b.Spec
	}
	return nil, nil
}

// confirmGone checks with the API server that the binding (spec nil) or
// its template is gone before its Works are deleted. If it is there, the
// informer has yet to hear of it: its add event queues the binding again.
func (c *Controller) confirmGone(ctx context.Context, key string, spec *v1alpha1.ResourceBindingSpec) (bool, error) {
	var err error
	switch {
	case spec == nil && strings.Contains(key, "/"):
		namespace, name, _ := strings.Cut(key, "/")
		_, err = c.clients.Flotilla.FlotillaV1alpha1().ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
	case spec == nil:
		_, err = c.clients.Flotilla.FlotillaV1alpha1().ClusterResourceBindings().Get(ctx, key, metav1.GetOptions{})
	default:
		err = c.getTemplate(ctx, spec.Resource)
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	c.logger.Debug("in the API server but not yet in the informer; waiting for it", "binding", key, "bindingKnown", spec != nil)
	return false, nil
}

// getTemplate reads a template from the API server, with the dynamic
// client: a NotFound error if it is not there, or if the API server no
// longer serves its kind.
func (c *Controller) getTemplate(ctx context.Context, ref v1alpha1.ObjectReference) error {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: ref.Kind}, ref.Name)
	}
	// Any served version will do: the kind's preferred one.
	gk := gv.WithKind(ref.Kind).GroupKind()
	mapping, err := c.clients.Mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		// A kind that is new since discovery was read (a CRD just
		// installed): read discovery again, once.
		c.clients.Mapper.Reset()
		mapping, err = c.clients.Mapper.RESTMapping(gk)
	}
	if meta.IsNoMatchError(err) {
		return apierrors.NewNotFound(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, ref.Name)
	}
	if err != nil {
		return fmt.Errorf("map %s: %w", gk, err)
	}
	r := c.clients.Dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		_, err = r.Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		_, err = r.Get(ctx, ref.Name, metav1.GetOptions{})
	}
	return err
}

func isDivided(spec *v1alpha1.ResourceBindingSpec) bool {
	p := spec.Placement
	return spec.Replicas > 0 && p != nil && p.ReplicaScheduling != nil &&
		p.ReplicaScheduling.ReplicaSchedulingType == v1alpha1.ReplicaSchedulingTypeDivided
}

// fencing is the binding's fencing setting as a Work carries it, nil if
// the binding's policy does not ask for fencing.
func fencing(spec *v1alpha1.ResourceBindingSpec) *v1alpha1.WorkFencing {
	f := spec.Failover
	if f == nil || f.Cluster == nil || f.Cluster.Fencing == nil || f.Cluster.Fencing.StopAfterSeconds <= 0 {
		return nil
	}
	return &v1alpha1.WorkFencing{StopAfterSeconds: f.Cluster.Fencing.StopAfterSeconds}
}

// workSource is what every cluster's Work of one binding is made from.
type workSource struct {
	binding  metav1.Object // events about rendering go to it
	key      string        // the binding's key
	workName string        // the name of its Work in every cluster
	template *unstructured.Unstructured
	spec     *v1alpha1.ResourceBindingSpec
}

// ensureWork creates or updates one cluster's Work of src, for replicas.
// A Work being deleted is left alone: its delete event brings the binding
// back here, and the Work is created anew.
func (c *Controller) ensureWork(ctx context.Context, src *workSource, cluster string, replicas int32) error {
	bindingKey, name := src.key, src.workName
	manifest, err := render(src.template, isDivided(src.spec), replicas, eviction.InjectedLabels(src.spec, cluster))
	if err != nil {
		c.recorder.Event(controller.BindingRef(src.binding), corev1.EventTypeWarning, "RenderFailed", err.Error())
		return err
	}
	want := v1alpha1.WorkSpec{Workload: v1alpha1.WorkloadTemplate{Manifests: []v1alpha1.Manifest{manifest}}, Fencing: fencing(src.spec),
		StatePaths: statePaths(src.spec)}
	wantReplicas := strconv.Itoa(int(replicas))
	namespace := v1alpha1.ExecutionNamespace(cluster)
	current := c.latest(controller.Key(namespace, name))
	switch {
	case current == nil:
		return c.createWork(ctx, newWork{bindingKey: bindingKey, cluster: cluster, namespace: namespace, name: name, spec: want, replicas: wantReplicas})
	case current.DeletionTimestamp != nil:
		c.logger.Debug("work wanted again while it is being deleted; it is created anew once it is gone",
			"binding", bindingKey, "cluster", cluster, "work", name)
		return nil
	case equality.Semantic.DeepEqual(current.Spec, want) && current.Annotations[v1alpha1.AnnotationWorkReplicas] == wantReplicas &&
		current.Annotations[v1alpha1.AnnotationWorkBinding] == bindingKey && slices.Contains(current.Finalizers, v1alpha1.WorkFinalizer):
		return nil
	}
	w := current.DeepCopy()
	w.Spec = want
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[v1alpha1.AnnotationWorkReplicas] = wantReplicas
	w.Annotations[v1alpha1.AnnotationWorkBinding] = bindingKey
	if !slices.Contains(w.Finalizers, v1alpha1.WorkFinalizer) {
		w.Finalizers = append(w.Finalizers, v1alpha1.WorkFinalizer)
	}
	// The API server bumps the generation when the spec changed: only a
	// new spec goes to the agent, the annotations alone do not. A Conflict
	// is retried once the informer has the Work's latest version.
	updated, err := c.clients.Flotilla.FlotillaV1alpha1().Works(namespace).Update(ctx, w, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	c.wrote(controller.Key(namespace, name), updated, err)
	if err != nil {
		return fmt.Errorf("update Work %s/%s: %w", namespace, name, err)
	}
	c.logger.Info("work updated", "binding", bindingKey, "cluster", cluster, "work", name, "generation", updated.Generation)
	return nil
}

// newWork is a Work to create: one cluster's Work of a binding.
type newWork struct {
	bindingKey string
	cluster    string
	// namespace is the cluster's execution namespace.
	namespace, name string
	spec            v1alpha1.WorkSpec
	// replicas is the value of its flotilla.io/replicas annotation.
	replicas string
}

// createWork creates a Work, and its execution namespace first if need be.
func (c *Controller) createWork(ctx context.Context, nw newWork) error {
	bindingKey, namespace, name, cluster := nw.bindingKey, nw.namespace, nw.name, nw.cluster
	if err := c.ensureNamespace(ctx, namespace); err != nil {
		return err
	}
	w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Finalizers: []string{v1alpha1.WorkFinalizer},
		Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: bindingKey, v1alpha1.AnnotationWorkReplicas: nw.replicas}}, Spec: nw.spec}
	created, err := c.clients.Flotilla.FlotillaV1alpha1().Works(namespace).Create(ctx, w, metav1.CreateOptions{FieldManager: controller.FieldManager})
	c.wrote(controller.Key(namespace, name), created, err)
	switch {
	case apierrors.IsAlreadyExists(err):
		// Created, and the informer has not heard of it yet: its add event
		// queues the binding again.
		c.logger.Debug("work exists but is not yet in the informer", "binding", bindingKey, "cluster", cluster, "work", name)
		return nil
	case apierrors.IsNotFound(err):
		c.namespaces.Delete(namespace) // deleted behind the hub's back: make it again
		return fmt.Errorf("create Work %s/%s: %w", namespace, name, err)
	case err != nil:
		return fmt.Errorf("create Work %s/%s: %w", namespace, name, err)
	}
	c.logger.Info("work created", "binding", bindingKey, "cluster", cluster, "work", name)
	return nil
}

// latest returns the newest version of a Work the controller knows, nil
// if none: the informer's, or its own last write while the informer has
// not caught up with it. A newer generation in the informer is a spec
// write after that one; another version at the same generation is taken
// to be older (if it is not, the write conflicts, which forgets the own
// version). Callers must not modify it.
func (c *Controller) latest(key string) *v1alpha1.Work {
	cached := c.works.Get(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	mine, ok := c.written[key]
	switch {
	case !ok:
	case cached == nil || cached.Generation < mine.Generation ||
		cached.Generation == mine.Generation && cached.ResourceVersion != mine.ResourceVersion:
		return mine
	default:
		delete(c.written, key)
	}
	return cached
}

// wrote remembers the Work a write returned, or forgets the one it
// remembered if the write failed.
func (c *Controller) wrote(key string, w *v1alpha1.Work, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.written, key)
		return
	}
	c.written[key] = w
}

// caughtUp forgets a written Work once the informer has it, or has seen
// it deleted.
func (c *Controller) caughtUp(old, cur *v1alpha1.Work) {
	w := controller.Subject(old, cur)
	key := controller.Key(w.Namespace, w.Name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if mine, ok := c.written[key]; ok && (cur == nil || mine.ResourceVersion == cur.ResourceVersion) {
		delete(c.written, key)
	}
}

// ensureNamespace creates a cluster's execution namespace unless it is
// known to exist.
func (c *Controller) ensureNamespace(ctx context.Context, namespace string) error {
	if _, ok := c.namespaces.Load(namespace); ok {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	_, err := c.clients.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: controller.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	c.namespaces.Store(namespace, true)
	return nil
}

// deleteOthers deletes every Work of the binding outside targets. Each
// stays, with its deletionTimestamp set, until the agent confirms its
// objects are gone and the dispatcher removes the finalizer.
func (c *Controller) deleteOthers(ctx context.Context, bindingKey string, targets map[string]target) error {
	var unwanted []*v1alpha1.Work
	for _, w := range c.works.ByIndex(controller.IndexWorksByBinding, bindingKey) {
		cluster := strings.TrimPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix)
		if _, wanted := targets[cluster]; !wanted && w.DeletionTimestamp == nil {
			unwanted = append(unwanted, w)
		}
	}
	return forEach(unwanted, func(w *v1alpha1.Work) error {
		// Only the Work read: one created anew meanwhile has another UID.
		err := c.clients.Flotilla.FlotillaV1alpha1().Works(w.Namespace).Delete(ctx, w.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &w.UID}})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("delete Work %s/%s: %w", w.Namespace, w.Name, err)
		}
		c.logger.Info("work marked for deletion", "binding", bindingKey, "cluster", strings.TrimPrefix(w.Namespace, v1alpha1.ExecutionNamespacePrefix), "work", w.Name)
		return nil
	})
}
