// Package status aggregates what agents report on Works into the bindings
// (status.aggregatedStatus and the FullyApplied condition) and into the
// templates (their status summed over clusters, e.g. a Deployment's
// readyReplicas), so users read a workload's health on the hub. It writes
// both through the status subresource only, so its writes never undo a
// scheduling or eviction write of the same binding.
package status

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/aggregate"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// ReportGathering is how long a binding's status waits after a change of
// the binding or of one of its Works before it is computed: the reports of
// its clusters' agents, which come at about the same time, then cost one
// write of the binding's status and one of its template's, instead of one
// each. A key already waiting keeps its time, so a steady stream of reports
// is still written at least this often.
const ReportGathering = time.Second

// Controller aggregates status.
type Controller struct {
	clients         *kube.Clients
	recorder        controller.Recorder
	logger          *slog.Logger
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	works           controller.Source[*v1alpha1.Work]
	clusters        controller.Source[*v1alpha1.Cluster]
	templates       controller.Source[*unstructured.Unstructured]
	queue           *controller.Queue

	// What the controller wrote, until the informers have it.
	bindingWrites        *writes[*v1alpha1.ResourceBinding]
	clusterBindingWrites *writes[*v1alpha1.ClusterResourceBinding]
	templateWrites       *writes[*unstructured.Unstructured]

	mu sync.Mutex
	// served holds, by group and version, the resources the API server
	// serves, subresources included ("deployments/status").
	served map[schema.GroupVersion]map[string]bool
}

// New returns a status controller that reads bindings, Works, clusters
// and templates from informers and writes statuses through clients. It
// adds its handlers to the shared informers; Run starts it. The clock is
// not used: condition times are the API machinery's.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, _ clock.PassiveClock, logger *slog.Logger) *Controller {
	c := &Controller{clients: clients, recorder: recorder, logger: logger.With("controller", "status"),
		bindings: informers.Bindings, clusterBindings: informers.ClusterBindings, works: informers.Works, clusters: informers.Clusters,
		templates: informers.Templates, served: map[schema.GroupVersion]map[string]bool{},
		bindingWrites: newWrites[*v1alpha1.ResourceBinding](), clusterBindingWrites: newWrites[*v1alpha1.ClusterResourceBinding](),
		templateWrites: newWrites[*unstructured.Unstructured]()}
	c.queue = controller.NewQueue("status", c.reconcile, logger)
	c.bindings.AddHandler(c.bindingWrites.caughtUp(func(b *v1alpha1.ResourceBinding) string { return controller.Key(b.Namespace, b.Name) }))
	c.clusterBindings.AddHandler(c.clusterBindingWrites.caughtUp(func(b *v1alpha1.ClusterResourceBinding) string { return b.Name }))
	c.templates.AddHandler(c.templateWrites.caughtUp(names.TemplateKey))
	// A cluster going silent or coming back changes its health column.
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if old != nil && cur != nil && aggregate.Reachable(old) == aggregate.Reachable(cur) {
			return
		}
		c.requeueOn(controller.Subject(old, cur).Name)
	})
	// A new placement is followed by its Works and their reports: its
	// status is written once they are in, not before each of them.
	c.bindings.AddHandler(func(_, cur *v1alpha1.ResourceBinding) {
		if cur != nil {
			c.queue.AddAfter(controller.Key(cur.Namespace, cur.Name), ReportGathering)
		}
	})
	c.clusterBindings.AddHandler(func(_, cur *v1alpha1.ClusterResourceBinding) {
		if cur != nil {
			c.queue.AddAfter(cur.Name, ReportGathering)
		}
	})
	// A binding's Works are reported by several agents at about the same
	// time: their reports are gathered into one status write.
	c.works.AddHandler(func(old, cur *v1alpha1.Work) {
		if owner := controller.Subject(old, cur).Annotations[v1alpha1.AnnotationWorkBinding]; owner != "" {
			c.queue.AddAfter(owner, ReportGathering)
		}
	})
	// A new generation of a template is the one its status observes.
	c.templates.AddHandler(func(old, cur *unstructured.Unstructured) {
		if cur != nil && (old == nil || old.GetGeneration() != cur.GetGeneration()) {
			c.queue.Add(controller.Key(cur.GetNamespace(), names.BindingName(cur.GetName(), cur.GetKind())))
		}
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.works, c.bindings, c.clusterBindings, c.clusters, c.templates) {
		return
	}
	c.queue.Run(ctx, workers)
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
	return cl != nil && aggregate.Reachable(cl)
}

func (c *Controller) reconcile(ctx context.Context, key string) error {
	api := c.clients.Flotilla.FlotillaV1alpha1()
	opts := metav1.UpdateOptions{FieldManager: controller.FieldManager}
	if namespace, name, namespaced := strings.Cut(key, "/"); namespaced {
		bindings := api.ResourceBindings(namespace)
		return reconcileBinding(ctx, c, bindingAccess[*v1alpha1.ResourceBinding]{
			key: key, name: name, cached: c.bindings.Get(key), writes: c.bindingWrites,
			get: func(ctx context.Context) (*v1alpha1.ResourceBinding, error) {
				return bindings.Get(ctx, name, metav1.GetOptions{})
			},
			updateStatus: func(ctx context.Context, b *v1alpha1.ResourceBinding) (*v1alpha1.ResourceBinding, error) {
				return bindings.UpdateStatus(ctx, b, opts)
			},
			parts: func(b *v1alpha1.ResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
				return &b.Spec, &b.Status
			},
		})
	}
	bindings := api.ClusterResourceBindings()
	return reconcileBinding(ctx, c, bindingAccess[*v1alpha1.ClusterResourceBinding]{
		key: key, name: key, cached: c.clusterBindings.Get(key), writes: c.clusterBindingWrites,
		get: func(ctx context.Context) (*v1alpha1.ClusterResourceBinding, error) {
			return bindings.Get(ctx, key, metav1.GetOptions{})
		},
		updateStatus: func(ctx context.Context, b *v1alpha1.ClusterResourceBinding) (*v1alpha1.ClusterResourceBinding, error) {
			return bindings.UpdateStatus(ctx, b, opts)
		},
		parts: func(b *v1alpha1.ClusterResourceBinding) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus) {
			return &b.Spec, &b.Status
		},
	})
}

// maxStatusAttempts bounds the writes of one binding's status when other
// controllers write the binding at the same time.
const maxStatusAttempts = 5

// bindingAccess is one binding to reconcile, of either kind, and how to
// read and write it.
type bindingAccess[PT object] struct {
	key, name string
	cached    PT // the informer's version, nil if none
	writes    *writes[PT]
	// get reads the binding from the API server; updateStatus writes its
	// status; parts are its spec and status.
	get          func(context.Context) (PT, error)
	updateStatus func(context.Context, PT) (PT, error)
	parts        func(PT) (*v1alpha1.ResourceBindingSpec, *v1alpha1.ResourceBindingStatus)
}

// reconcileBinding writes the status of one binding. The status fields it
// writes are this controller's alone, so a write that conflicts with
// another controller's (a placement, an eviction) is not given up: the
// binding is read again and its status computed anew from the spec it now
// has.
func reconcileBinding[PT object](ctx context.Context, c *Controller, a bindingAccess[PT]) error {
	var zero PT
	b := a.writes.latest(a.key, a.cached)
	if b == zero {
		return nil
	}
	workName := names.WorkName(a.key, a.name)
	workOf := func(cluster string) *v1alpha1.Work {
		return c.works.Get(controller.Key(v1alpha1.ExecutionNamespace(cluster), workName))
	}
	for attempt := 1; ; attempt++ {
		b = deepCopy(b)
		spec, status := a.parts(b)
		err := c.update(ctx, b, spec, status, workOf, func(ctx context.Context) error {
			updated, err := a.updateStatus(ctx, b)
			a.writes.wrote(a.key, updated, err)
			return err
		})
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return err
		}
		if b, err = a.get(ctx); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// deepCopy copies an API object of the kinds the controller writes.
func deepCopy[PT object](obj PT) PT {
	return any(obj).(interface{ DeepCopyObject() runtime.Object }).DeepCopyObject().(PT)
}

// update writes a binding's aggregated status (obj is a copy from the
// informer, whose spec and status are given; write stores its status) and
// its template's status.
func (c *Controller) update(ctx context.Context, obj metav1.Object, spec *v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus,
	workOf func(string) *v1alpha1.Work, write func(context.Context) error) error {
	items := aggregate.Items(spec, workOf, c.reachable)
	changed := !equality.Semantic.DeepEqual(status.AggregatedStatus, items)
	status.AggregatedStatus = items
	before := meta.FindStatusCondition(status.Conditions, v1alpha1.BindingConditionFullyApplied)
	wasApplied := before != nil && before.Status == metav1.ConditionTrue
	var beforeMessage string
	if before != nil {
		beforeMessage = before.Message
	}
	cond := aggregate.FullyApplied(items, obj.GetGeneration())
	if meta.SetStatusCondition(&status.Conditions, cond) {
		changed = true
	}
	if changed {
		// A Conflict (another controller wrote the binding) is retried
		// once the informer has the new version.
		if err := write(ctx); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("store status of binding %s: %w", controller.Key(obj.GetNamespace(), obj.GetName()), err)
		}
		ref := controller.BindingRef(obj)
		switch {
		case cond.Status == metav1.ConditionTrue && !wasApplied:
			c.recorder.Event(ref, corev1.EventTypeNormal, "FullyApplied", cond.Message)
		case cond.Reason == v1alpha1.ReasonFullyAppliedFailed && (before == nil || beforeMessage != cond.Message):
			c.recorder.Event(ref, corev1.EventTypeWarning, "ApplyFailed", cond.Message)
		}
	}
	return c.updateTemplate(ctx, spec, items)
}

// jobKind has no status.observedGeneration.
var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// updateTemplate writes the summed status on a workload template, through
// its status subresource; kinds without one are left alone.
func (c *Controller) updateTemplate(ctx context.Context, spec *v1alpha1.ResourceBindingSpec, items []v1alpha1.AggregatedStatusItem) error {
	if spec.Replicas == 0 {
		return nil // not a workload: nothing to sum
	}
	ref := spec.Resource
	key := names.TemplateKeyOf(ref)
	cur := c.templateWrites.latest(key, c.templates.Get(key))
	if cur == nil {
		return nil
	}
	want := aggregate.SummedStatus(items)
	if want == nil {
		// No cluster reports (none placed, or none applied yet): old sums
		// must not linger as if replicas were still ready somewhere.
		want = map[string]any{}
	}
	gvk := cur.GroupVersionKind()
	if gvk.GroupKind() != jobKind {
		want["observedGeneration"] = cur.GetGeneration()
	}
	current, _, _ := unstructured.NestedMap(cur.Object, "status")
	if equality.Semantic.DeepEqual(current, want) {
		return nil
	}
	mapping, hasStatus, err := c.statusSubresource(gvk)
	if err != nil || !hasStatus {
		return err
	}
	u := cur.DeepCopy()
	u.Object["status"] = want
	r := c.clients.Dynamic.Resource(mapping.Resource)
	var updated *unstructured.Unstructured
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		updated, err = r.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	} else {
		updated, err = r.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	}
	c.templateWrites.wrote(key, updated, err)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsInvalid(err):
		// Sums the kind's own validation refuses: retrying cannot help.
		c.logger.Warn("template status refused", "kind", gvk.Kind, "template", controller.Key(u.GetNamespace(), u.GetName()), "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("store status of template %s %s: %w", ref.Kind, controller.Key(ref.Namespace, ref.Name), err)
	}
	return nil
}

// statusSubresource maps a template's kind to its resource and says
// whether the API server serves a status subresource for it. A kind the
// API server does not know (yet) makes it read discovery again, once.
func (c *Controller) statusSubresource(gvk schema.GroupVersionKind) (*meta.RESTMapping, bool, error) {
	mapping, err := c.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.clients.Mapper.Reset()
		c.mu.Lock()
		clear(c.served)
		c.mu.Unlock()
		mapping, err = c.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, false, nil // no longer served: the template is gone
	}
	if err != nil {
		return nil, false, fmt.Errorf("map %s: %w", gvk.GroupKind(), err)
	}
	gv := mapping.Resource.GroupVersion()
	c.mu.Lock()
	served, ok := c.served[gv]
	c.mu.Unlock()
	if !ok || !served[mapping.Resource.Resource] {
		list, err := c.clients.Kube.Discovery().ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return nil, false, fmt.Errorf("discover %s: %w", gv, err)
		}
		served = map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		c.mu.Lock()
		c.served[gv] = served
		c.mu.Unlock()
	}
	return mapping, served[mapping.Resource.Resource+"/status"], nil
}
