// Package purge runs PurgeRequests (flotilla.io/v1alpha1, cluster-scoped):
// the end of a binding's graceful eviction task by hand, the way out of
// purge mode Never and of any task an operator does not want to wait for.
// The binding controller then removes the evicted cluster's copy.
//
// For each new request (no status.result yet) the controller reads the
// binding spec.binding names (a ResourceBinding, or a
// ClusterResourceBinding when the namespace is empty) and removes its task
// from spec.cluster with Update, over the API server's latest version on a
// conflict (failover and the scheduler write the same bindings). It records
// EvictionTaskEnded on the binding and on its template, then answers in
// the request's status (through the status subresource):
//
//   - result Purged, with the task's reason and purge mode in the message;
//   - result Failed, reason BindingNotFound: no such binding;
//   - result Failed, reason NoEvictionTask: the binding has no task from
//     that cluster (none, or it ended already).
//
// status.finishTime is when it answered. A missing binding or task is
// checked in the API server, not only in the informers, since the answer
// is final. An answer whose status write fails is kept in memory and
// written on the next try, so a retried request never finds its own task
// gone and reports NoEvictionTask.
//
// A request is deleted spec.ttlSecondsAfterFinished (default 300 s) after
// its finishTime: the controller wakes at that deadline (no polling) and
// deletes exactly the version it checked (a resourceVersion precondition),
// so a TTL edited just before wins. Spec edits after the answer change
// nothing else.
package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Reasons of a Failed request, and event reasons.
const (
	ReasonBindingNotFound   = "BindingNotFound"
	ReasonNoEvictionTask    = "NoEvictionTask"
	ReasonEvictionTaskEnded = "EvictionTaskEnded"
)

// DefaultTTL deletes a request without spec.ttlSecondsAfterFinished.
const DefaultTTL = 300 * time.Second

var updateOptions = metav1.UpdateOptions{FieldManager: controller.FieldManager}

// errNoTask: the binding has no eviction task from the cluster.
var errNoTask = errors.New("no eviction task")

// Controller runs PurgeRequests.
type Controller struct {
	client          flotillaclient.Interface
	recorder        controller.Recorder
	clock           clock.WithTicker
	logger          *slog.Logger
	requests        *controller.Shared[*v1alpha1.PurgeRequest]
	bindings        controller.Source[*v1alpha1.ResourceBinding]
	clusterBindings controller.Source[*v1alpha1.ClusterResourceBinding]
	queue           *controller.Queue

	mu sync.Mutex
	// answers are the answers whose status write has not succeeded yet,
	// by request UID; guarded by mu.
	answers map[types.UID]v1alpha1.PurgeRequestStatus

	// waiting, a test hook, hears of every wake-up the controller asks for.
	waiting func(name string, at time.Time)
}

// New returns a PurgeRequest controller that reads PurgeRequests and
// bindings from the shared informers and writes through clients. It adds
// its handlers to the informers; Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.WithTicker, logger *slog.Logger) *Controller {
	c := &Controller{client: clients.Flotilla, recorder: recorder, clock: clk, logger: logger.With("controller", "purge"),
		requests: informers.Purges, bindings: informers.Bindings, clusterBindings: informers.ClusterBindings, answers: map[types.UID]v1alpha1.PurgeRequestStatus{}}
	c.queue = controller.NewQueueWithClock("purge", c.reconcile, logger, clk)
	c.requests.AddHandler(func(old, cur *v1alpha1.PurgeRequest) {
		if cur == nil {
			c.mu.Lock()
			delete(c.answers, old.UID)
			c.mu.Unlock()
			return
		}
		c.queue.Add(cur.Name)
	})
	return c
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.requests, c.bindings, c.clusterBindings) {
		return
	}
	c.queue.Run(ctx, workers)
}

// reconcile answers one request, as the informer has it, then deletes it
// once its TTL is over.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	pr := c.requests.Get(name)
	if pr == nil {
		return nil
	}
	pr = pr.DeepCopy()
	if pr.Status.Result == "" {
		answer, err := c.answer(ctx, pr)
		if err != nil {
			return err
		}
		if pr, err = c.writeStatus(ctx, pr, answer); pr == nil || err != nil {
			return err
		}
	}
	return c.expire(ctx, pr)
}

// answer ends the task the request names, or says why it cannot.
func (c *Controller) answer(ctx context.Context, pr *v1alpha1.PurgeRequest) (v1alpha1.PurgeRequestStatus, error) {
	c.mu.Lock()
	answer, ok := c.answers[pr.UID]
	c.mu.Unlock()
	if ok {
		return answer, nil
	}
	key, cluster := controller.Key(pr.Spec.Binding.Namespace, pr.Spec.Binding.Name), pr.Spec.Cluster
	now := metav1.NewTime(c.clock.Now())
	answer = v1alpha1.PurgeRequestStatus{Result: v1alpha1.PurgeResultFailed, FinishTime: &now}
	b, task, err := c.endTask(ctx, key, cluster)
	switch {
	case apierrors.IsNotFound(err):
		answer.Reason, answer.Message = ReasonBindingNotFound, fmt.Sprintf("%s %s not found", bindingKind(key), key)
	case errors.Is(err, errNoTask):
		answer.Reason, answer.Message = ReasonNoEvictionTask, fmt.Sprintf("%s %s has no eviction task from cluster %s", bindingKind(key), key, cluster)
	case err != nil:
		return v1alpha1.PurgeRequestStatus{}, fmt.Errorf("purge request %s: %w", pr.Name, err)
	default:
		mode := v1alpha1.NormalPurgeMode(task.PurgeMode)
		answer.Result = v1alpha1.PurgeResultPurged
		answer.Message = fmt.Sprintf("eviction task of %s %s from %s ended (was %s, purge mode %s); its copy there is removed", bindingKind(key), key, cluster, task.Reason, mode)
		message := fmt.Sprintf("eviction from %s ended by hand (was %s, purge mode %s); its copy there is removed", cluster, task.Reason, mode)
		c.recorder.Event(controller.BindingRef(b), corev1.EventTypeNormal, ReasonEvictionTaskEnded, message)
		c.recorder.Event(controller.TemplateRef(specOf(b).Resource), corev1.EventTypeNormal, ReasonEvictionTaskEnded, message)
		c.logger.Info("eviction task ended by hand", "binding", key, "cluster", cluster, "purgeRequest", pr.Name)
	}
	if answer.Result == v1alpha1.PurgeResultFailed {
		c.logger.Info("purge request failed", "purgeRequest", pr.Name, "reason", answer.Reason, "message", answer.Message)
	}
	c.mu.Lock()
	c.answers[pr.UID] = answer
	c.mu.Unlock()
	return answer, nil
}

// endTask removes the binding's eviction task from cluster with Update,
// retried over the latest version on a conflict, and returns the binding
// as written and the task. The informers' copy is tried first; a missing
// binding or task is confirmed in the API server.
func (c *Controller) endTask(ctx context.Context, key, cluster string) (metav1.Object, v1alpha1.GracefulEvictionTask, error) {
	var (
		written metav1.Object
		task    v1alpha1.GracefulEvictionTask
	)
	informed := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := c.binding(ctx, key, cluster, informed)
		informed = false // from now on, the API server's latest
		if err != nil {
			return err
		}
		spec := specOf(b)
		i := slices.IndexFunc(spec.GracefulEvictionTasks, func(t v1alpha1.GracefulEvictionTask) bool { return t.FromCluster == cluster })
		if i < 0 {
			return errNoTask
		}
		task = spec.GracefulEvictionTasks[i]
		spec.GracefulEvictionTasks = slices.Delete(slices.Clone(spec.GracefulEvictionTasks), i, i+1)
		written, err = c.update(ctx, b)
		return err
	})
	return written, task, err
}

// binding returns a copy of the binding with key (a *ResourceBinding or a
// *ClusterResourceBinding): the informer's if informed and it holds it
// with a task from cluster, else the API server's.
func (c *Controller) binding(ctx context.Context, key, cluster string, informed bool) (metav1.Object, error) {
	fl := c.client.FlotillaV1alpha1()
	if namespace, name, ok := strings.Cut(key, "/"); ok {
		if b := c.bindings.Get(key); informed && b != nil && slices.Contains(b.Spec.EvictingClusters(), cluster) {
			return b.DeepCopy(), nil
		}
		return fl.ResourceBindings(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	if b := c.clusterBindings.Get(key); informed && b != nil && slices.Contains(b.Spec.EvictingClusters(), cluster) {
		return b.DeepCopy(), nil
	}
	return fl.ClusterResourceBindings().Get(ctx, key, metav1.GetOptions{})
}

func (c *Controller) update(ctx context.Context, b metav1.Object) (metav1.Object, error) {
	fl := c.client.FlotillaV1alpha1()
	if rb, ok := b.(*v1alpha1.ResourceBinding); ok {
		return fl.ResourceBindings(rb.Namespace).Update(ctx, rb, updateOptions)
	}
	return fl.ClusterResourceBindings().Update(ctx, b.(*v1alpha1.ClusterResourceBinding), updateOptions)
}

func specOf(b metav1.Object) *v1alpha1.ResourceBindingSpec {
	if rb, ok := b.(*v1alpha1.ResourceBinding); ok {
		return &rb.Spec
	}
	return &b.(*v1alpha1.ClusterResourceBinding).Spec
}

func bindingKind(key string) string {
	if strings.Contains(key, "/") {
		return v1alpha1.KindResourceBinding
	}
	return v1alpha1.KindClusterResourceBinding
}

// writeStatus stores the answer in the request's status and returns the
// request as written, or nil if it is gone. The status is the
// controller's alone: on a conflict (the request was edited) the answer is
// written over the latest version.
func (c *Controller) writeStatus(ctx context.Context, pr *v1alpha1.PurgeRequest, answer v1alpha1.PurgeRequestStatus) (*v1alpha1.PurgeRequest, error) {
	requests := c.client.FlotillaV1alpha1().PurgeRequests()
	var stored *v1alpha1.PurgeRequest
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr.Status = answer
		var err error
		stored, err = requests.UpdateStatus(ctx, pr, updateOptions)
		if !apierrors.IsConflict(err) {
			return err
		}
		latest, getErr := requests.Get(ctx, pr.Name, metav1.GetOptions{})
		switch {
		case getErr != nil:
			return getErr
		case latest.UID != pr.UID || latest.Status.Result != "":
			stored = nil // another request of that name, or answered meanwhile
			return nil
		}
		pr = latest
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		stored, err = nil, nil // deleted before the answer: nothing to tell
	case err != nil:
		return nil, fmt.Errorf("store the answer to purge request %s: %w", pr.Name, err)
	}
	c.mu.Lock()
	delete(c.answers, pr.UID)
	c.mu.Unlock()
	if stored != nil {
		eventType := corev1.EventTypeNormal
		if answer.Result != v1alpha1.PurgeResultPurged {
			eventType = corev1.EventTypeWarning
		}
		c.recorder.Event(requestRef(stored), eventType, answer.Result, answer.Message)
	}
	return stored, nil
}

// expire deletes an answered request whose TTL has passed, or wakes up
// when it will have.
func (c *Controller) expire(ctx context.Context, pr *v1alpha1.PurgeRequest) error {
	if pr.Status.FinishTime == nil {
		return nil
	}
	ttl := DefaultTTL
	if s := pr.Spec.TTLSecondsAfterFinished; s != nil {
		ttl = time.Duration(max(*s, 0)) * time.Second
	}
	deadline := pr.Status.FinishTime.Add(ttl)
	if wait := deadline.Sub(c.clock.Now()); wait > 0 {
		c.queue.AddAfter(pr.Name, wait)
		if c.waiting != nil {
			c.waiting(pr.Name, deadline)
		}
		return nil
	}
	// Only the version checked: an edit since (a new TTL) makes the delete
	// fail, and its event brings the request back.
	precondition := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pr.UID, ResourceVersion: &pr.ResourceVersion}}
	if err := c.client.FlotillaV1alpha1().PurgeRequests().Delete(ctx, pr.Name, precondition); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			c.logger.Info("purge request changed just before its deletion; kept", "purgeRequest", pr.Name)
			return nil
		}
		return fmt.Errorf("delete purge request %s: %w", pr.Name, err)
	}
	c.logger.Info("purge request deleted after its TTL", "purgeRequest", pr.Name, "ttl", ttl)
	return nil
}

func requestRef(pr *v1alpha1.PurgeRequest) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindPurgeRequest, Name: pr.Name, UID: pr.UID}
}
