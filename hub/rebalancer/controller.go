// Package rebalancer runs WorkloadRebalancers (apps.flotilla.io/v1alpha1),
// following Karmada's rebalancer proposal: a WorkloadRebalancer asks for a
// Fresh reschedule of its workloads, and this controller asks the
// scheduler for it through each workload's binding.
//
// For every workload of spec.workloads that has no result in the status
// yet, the controller looks up its binding: the ResourceBinding
// <name>-<lower-case kind> in the workload's namespace, or the
// ClusterResourceBinding of that name when the namespace is empty, made by
// the detector for that very template (same group, kind, namespace and
// name). It sets the binding's spec.rescheduleTriggeredAt to the
// rebalancer's creationTimestamp, unless the binding already carries a
// trigger at least that late, with an Update retried on conflict over the
// latest version (the generation grows, as with every spec change). The
// scheduler sees the trigger later than status.lastScheduledTime and
// places the replicas from scratch. The result of the workload is then:
//
//   - Successful: the binding carries the trigger;
//   - Failed, reason ReferencedBindingNotFound: there is no such binding
//     (no such template, or no policy propagates it). It is not retried;
//   - none, while another error (the API server) is retried with backoff.
//
// Bindings are looked up in the shared informers; one the informers do not
// hold is looked up in the API server before it is reported missing, since
// that result is final.
//
// The status holds status.observedWorkloads sorted by apiVersion, kind,
// namespace and name, status.observedGeneration (the generation acted on)
// and status.finishTime, set when every workload has a result; it is
// written through the status subresource with the resourceVersion read. A
// rebalancer is finished when it has a finishTime and its
// observedGeneration is its generation.
//
// Edits of spec.workloads rebuild the status list from the spec: a
// workload still listed keeps its result and is not triggered again; an
// added workload is triggered; a workload no longer listed stays in the
// status if it was Successful and leaves it otherwise (Failed, or no result
// yet); a changed workload is one removed and one added; a new order
// changes nothing, as the list is sorted. When an edit makes a workload get
// a result, finishTime moves to that moment, which defers the deletion.
//
// With spec.ttlSecondsAfterFinished the rebalancer is deleted at finishTime
// plus the TTL (at once for zero); without it, never. The controller wakes
// at that deadline (Queue.AddAfter, no polling), checks the rebalancer it
// holds (the informer's latest) again, finished and expired under its
// latest TTL and finishTime, and deletes exactly the version it checked
// (a delete with a resourceVersion precondition): an edit between the
// check and the delete makes the delete fail, and the rebalancer is
// considered again when the informer brings the edit.
//
// The controller is idempotent: a restarted controller finds the results
// in the status and triggers nothing again, and a trigger already on a
// binding is not written twice. Times have a precision of one second, as
// in Kubernetes: a rebalancer created in the second of a binding's last
// schedule does not reschedule it (the trigger is not later).
//
// Every decision is an event on the rebalancer (RescheduleTriggered,
// ReferencedBindingNotFound, Finished, Deleted); a triggered binding gets
// a RescheduleTriggered event too.
package rebalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Event reasons on rebalancers (and RescheduleTriggered on bindings).
const (
	ReasonRescheduleTriggered = "RescheduleTriggered"
	ReasonBindingNotFound     = string(appsv1alpha1.RebalanceObjectNotFound)
	ReasonFinished            = "Finished"
	ReasonDeleted             = "Deleted"
)

// Controller runs WorkloadRebalancers.
type Controller struct {
	client          flotillaclient.Interface
	recorder        controller.Recorder
	clock           clock.WithTicker
	logger          *slog.Logger
	rebalancers     controller.Source[*appsv1alpha1.WorkloadRebalancer]
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	queue           *controller.Queue
	// Test hooks: beforeDelete runs between the final check and the
	// delete (to edit the rebalancer at the worst moment); waiting hears
	// of every wake-up the controller asks for.
	beforeDelete func()
	waiting      func(name string, at time.Time)
}

// New returns a rebalancer controller that reads rebalancers and bindings
// from the shared informers and writes them through clients; clk stamps
// finish times and measures TTLs. It adds its handler to the informers;
// Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.WithTicker, logger *slog.Logger) *Controller {
	c := &Controller{client: clients.Flotilla, recorder: recorder, clock: clk, logger: logger.With("controller", "rebalancer"),
		rebalancers: informers.Rebalancers, bindings: informers.Bindings, clusterBindings: informers.ClusterBindings}
	c.queue = controller.NewQueueWithClock("rebalancer", c.reconcile, logger, clk)
	// Every change matters: a spec edit to act on, a status write that
	// finished the rebalancer (its TTL starts), a TTL changed.
	c.rebalancers.AddHandler(func(_, cur *appsv1alpha1.WorkloadRebalancer) {
		if cur != nil {
			c.queue.Add(cur.Name)
		}
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.rebalancers, c.bindings, c.clusterBindings) {
		return
	}
	c.queue.Run(ctx, workers)
}

var updateOptions = metav1.UpdateOptions{FieldManager: controller.FieldManager}

// errRetry says some workload still needs another try; errConflict that
// the rebalancer changed while being worked on.
var (
	errRetry    = errors.New("some workloads still need a try")
	errConflict = errors.New("changed meanwhile")
)

// reconcile acts on one rebalancer, as the informer has it. Every write
// carries the resourceVersion read: acting on a version the informer has
// not caught up with fails with a conflict, and the informer's event for
// the newer version queues the rebalancer again.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	rb := c.rebalancers.Get(name)
	if rb == nil {
		return nil
	}
	rb = rb.DeepCopy()
	if !rb.Finished() {
		var err error
		rb, err = c.sync(ctx, rb)
		if errors.Is(err, errConflict) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return c.expire(ctx, rb)
}

// outcome is what one reconcile did for one workload, for events.
type outcome struct {
	workload appsv1alpha1.ObjectReference
	binding  string // "NS/NAME" or "NAME"
	result   appsv1alpha1.RebalanceResult
}

// sync brings the status in step with the spec, triggering the workloads
// without a result, and returns the stored rebalancer. It returns errRetry
// (after storing what it could) when some workload must be tried again.
func (c *Controller) sync(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) (*appsv1alpha1.WorkloadRebalancer, error) {
	previous := map[appsv1alpha1.ObjectReference]appsv1alpha1.ObservedWorkload{}
	for _, o := range rb.Status.ObservedWorkloads {
		previous[o.Workload] = o
	}
	listed := map[appsv1alpha1.ObjectReference]bool{}
	var (
		observed []appsv1alpha1.ObservedWorkload
		outcomes []outcome
		failures []error
	)
	for _, w := range rb.Spec.Workloads {
		if listed[w] {
			continue // validation refuses duplicates; be safe anyway
		}
		listed[w] = true
		if o, ok := previous[w]; ok && o.Result != "" {
			observed = append(observed, o)
			continue
		}
		o := appsv1alpha1.ObservedWorkload{Workload: w}
		binding, found, err := c.trigger(ctx, rb, w)
		switch {
		case err != nil:
			failures = append(failures, fmt.Errorf("%s: %w", workloadString(w), err))
		case found:
			o.Result = appsv1alpha1.RebalanceSuccessful
		default:
			o.Result, o.Reason = appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound
		}
		if o.Result != "" {
			outcomes = append(outcomes, outcome{workload: w, binding: binding, result: o.Result})
		}
		observed = append(observed, o)
	}
	for _, o := range rb.Status.ObservedWorkloads {
		if !listed[o.Workload] && o.Result == appsv1alpha1.RebalanceSuccessful {
			observed = append(observed, o)
		}
	}
	slices.SortFunc(observed, func(a, b appsv1alpha1.ObservedWorkload) int { return compareWorkloads(a.Workload, b.Workload) })

	status := appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: observed, ObservedGeneration: rb.Generation, FinishTime: rb.Status.FinishTime}
	switch {
	case len(failures) > 0:
		status.FinishTime = nil
	case status.FinishTime == nil || len(outcomes) > 0:
		now := metav1.NewTime(c.clock.Now())
		status.FinishTime = &now
	}
	stored := rb
	if !equality.Semantic.DeepEqual(rb.Status, status) {
		update := rb.DeepCopy()
		update.Status = status
		var err error
		if stored, err = c.client.AppsV1alpha1().WorkloadRebalancers().UpdateStatus(ctx, update, updateOptions); err != nil {
			// The triggers are on the bindings; the next try finds them
			// there and only stores the status. A conflict is a newer
			// version, whose event queues the rebalancer again: no backoff.
			if apierrors.IsConflict(err) {
				c.logger.Info("rebalancer changed meanwhile; acting on the new version", "rebalancer", rb.Name)
				return nil, errConflict
			}
			return nil, fmt.Errorf("store the status of rebalancer %s: %w", rb.Name, err)
		}
	}
	c.record(stored, outcomes)
	if len(failures) > 0 {
		c.logger.Warn("rebalance incomplete; retrying", "rebalancer", rb.Name, "err", errors.Join(failures...))
		return nil, fmt.Errorf("rebalancer %s: %w: %w", rb.Name, errRetry, errors.Join(failures...))
	}
	return stored, nil
}

// record makes the events of one sync, once its status is stored.
func (c *Controller) record(rb *appsv1alpha1.WorkloadRebalancer, outcomes []outcome) {
	ref := rebalancerRef(rb)
	for _, o := range outcomes {
		if o.result == appsv1alpha1.RebalanceSuccessful {
			c.recorder.Event(ref, corev1.EventTypeNormal, ReasonRescheduleTriggered,
				fmt.Sprintf("%s: Fresh reschedule asked of binding %s", workloadString(o.workload), o.binding))
			c.recorder.Event(bindingRef(o.workload), corev1.EventTypeNormal, ReasonRescheduleTriggered,
				fmt.Sprintf("Fresh reschedule asked by WorkloadRebalancer %s", rb.Name))
			c.logger.Info("reschedule triggered", "rebalancer", rb.Name, "binding", o.binding)
			continue
		}
		c.recorder.Event(ref, corev1.EventTypeWarning, ReasonBindingNotFound,
			fmt.Sprintf("%s: no binding %s (no such template, or no policy propagates it)", workloadString(o.workload), o.binding))
		c.logger.Info("workload has no binding", "rebalancer", rb.Name, "binding", o.binding)
	}
	if len(outcomes) > 0 && rb.Finished() {
		var successful, failed int
		for _, o := range rb.Status.ObservedWorkloads {
			if o.Result == appsv1alpha1.RebalanceSuccessful {
				successful++
			} else {
				failed++
			}
		}
		msg := fmt.Sprintf("%d workloads: %d successful, %d failed", successful+failed, successful, failed)
		c.recorder.Event(ref, corev1.EventTypeNormal, ReasonFinished, msg)
		c.logger.Info("rebalancer finished", "rebalancer", rb.Name, "successful", successful, "failed", failed)
	}
}

// trigger asks for a Fresh reschedule of one workload's binding. It
// returns the binding's name and whether it exists.
func (c *Controller) trigger(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer, w appsv1alpha1.ObjectReference) (string, bool, error) {
	gv, err := schema.ParseGroupVersion(w.APIVersion)
	if err != nil { // validation refuses it; report it as no binding
		return w.Name, false, nil
	}
	key := controller.Key(w.Namespace, names.BindingName(w.Name, w.Kind))
	template := names.TemplateKeyFor(schema.GroupKind{Group: gv.Group, Kind: w.Kind}, w.Namespace, w.Name)
	found, err := c.triggerBinding(ctx, key, template, rb.CreationTimestamp)
	return key, found, err
}

// triggerBinding sets spec.rescheduleTriggeredAt of a binding to at unless
// it is already that late, with an Update retried on conflict over the
// latest version. It reports whether the binding exists (and is the
// template's).
func (c *Controller) triggerBinding(ctx context.Context, key, template string, at metav1.Time) (bool, error) {
	found, informed := false, true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		found = false
		b, err := c.binding(ctx, key, informed)
		informed = false // after a conflict, the API server's latest
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if b.GetAnnotations()[names.AnnotationTemplate] != template {
			return nil // the binding of a same-named template of another group
		}
		found = true
		spec := specOf(b)
		if spec.RescheduleTriggeredAt != nil && !spec.RescheduleTriggeredAt.Before(&at) {
			return nil
		}
		spec.RescheduleTriggeredAt = at.DeepCopy()
		return c.updateBinding(ctx, b)
	})
	if err != nil {
		return false, fmt.Errorf("trigger binding %s: %w", key, err)
	}
	return found, nil
}

// binding returns a copy of the binding with key (a *ResourceBinding or a
// *ClusterResourceBinding): the informer's if informed and it holds it,
// else the API server's.
func (c *Controller) binding(ctx context.Context, key string, informed bool) (metav1.Object, error) {
	fl := c.client.FlotillaV1alpha1()
	if namespace, name, ok := strings.Cut(key, "/"); ok {
		if b := c.bindings.Get(key); informed && b != nil {
			return b.DeepCopy(), nil
		}
		return fl.ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if b := c.clusterBindings.Get(key); informed && b != nil {
		return b.DeepCopy(), nil
	}
	return fl.ClusterResourceBindings().Get(ctx, key, metav1.GetOptions{})
}

func specOf(b metav1.Object) *v1alpha1.ResourceBindingSpec {
	if rb, ok := b.(*v1alpha1.ResourceBinding); ok {
		return &rb.Spec
	}
	return &b.(*v1alpha1.ClusterResourceBinding).Spec
}

// updateBinding writes a binding's spec with Update.
func (c *Controller) updateBinding(ctx context.Context, b metav1.Object) error {
	fl := c.client.FlotillaV1alpha1()
	var err error
	if rb, ok := b.(*v1alpha1.ResourceBinding); ok {
		_, err = fl.ResourceBindings(rb.Namespace).Update(ctx, rb, updateOptions)
	} else {
		_, err = fl.ClusterResourceBindings().Update(ctx, b.(*v1alpha1.ClusterResourceBinding), updateOptions)
	}
	return err
}

// expire deletes a finished rebalancer whose TTL has passed, or wakes up
// when it will have.
func (c *Controller) expire(ctx context.Context, rb *appsv1alpha1.WorkloadRebalancer) error {
	deadline, ok := expiry(rb)
	if !ok {
		return nil
	}
	if wait := deadline.Sub(c.clock.Now()); wait > 0 {
		c.queue.AddAfter(rb.Name, wait)
		if c.waiting != nil {
			c.waiting(rb.Name, deadline)
		}
		return nil
	}
	if c.beforeDelete != nil {
		c.beforeDelete()
	}
	// Only the version checked: an edit since (a moved finish time, a new
	// TTL) makes the delete fail, and its event brings the rebalancer back.
	precondition := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rb.UID, ResourceVersion: &rb.ResourceVersion}}
	if err := c.client.AppsV1alpha1().WorkloadRebalancers().Delete(ctx, rb.Name, precondition); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			c.logger.Info("rebalancer changed just before its deletion; kept", "rebalancer", rb.Name)
			return nil
		}
		return fmt.Errorf("delete rebalancer %s: %w", rb.Name, err)
	}
	ttl := *rb.Spec.TTLSecondsAfterFinished
	c.recorder.Event(rebalancerRef(rb), corev1.EventTypeNormal, ReasonDeleted,
		fmt.Sprintf("deleted %ds after it finished (ttlSecondsAfterFinished)", ttl))
	c.logger.Info("rebalancer deleted after its TTL", "rebalancer", rb.Name, "ttlSecondsAfterFinished", ttl)
	return nil
}

// expiry is when a finished rebalancer with a TTL is to be deleted.
func expiry(rb *appsv1alpha1.WorkloadRebalancer) (time.Time, bool) {
	ttl := rb.Spec.TTLSecondsAfterFinished
	if ttl == nil || !rb.Finished() {
		return time.Time{}, false
	}
	return rb.Status.FinishTime.Add(time.Duration(*ttl) * time.Second), true
}

// compareWorkloads orders by apiVersion, kind, namespace, name.
func compareWorkloads(a, b appsv1alpha1.ObjectReference) int {
	return cmp.Or(cmp.Compare(a.APIVersion, b.APIVersion), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// workloadString names a workload: "apps/v1 Deployment web/nginx".
func workloadString(w appsv1alpha1.ObjectReference) string {
	return w.APIVersion + " " + w.Kind + " " + controller.Key(w.Namespace, w.Name)
}

func rebalancerRef(rb *appsv1alpha1.WorkloadRebalancer) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: appsv1alpha1.APIVersion, Kind: appsv1alpha1.KindWorkloadRebalancer, Name: rb.Name, UID: rb.UID}
}

// bindingRef names the binding of a workload in events.
func bindingRef(w appsv1alpha1.ObjectReference) corev1.ObjectReference {
	return controller.BindingRef(&metav1.ObjectMeta{Namespace: w.Namespace, Name: names.BindingName(w.Name, w.Kind)})
}
