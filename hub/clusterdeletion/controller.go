// Package clusterdeletion makes a deleted Cluster go only once its
// workloads have left, as Karmada's cluster controller does.
//
// Every Cluster carries the finalizer v1alpha1.ClusterFinalizer: a join or
// certs issue creates it with one, and this controller adds it to any
// Cluster it sees without one (created with kubectl, or before this
// version). When a Cluster has a deletionTimestamp the registry adds the
// taint cluster.flotilla.io/terminating:NoExecute, which the failover
// taint manager acts on: bindings that do not tolerate it are evicted, the
// scheduler places them elsewhere, and their graceful eviction tasks end
// as usual. This controller waits until no ResourceBinding or
// ClusterResourceBinding lists the cluster in spec.clusters or in
// spec.gracefulEvictionTasks, then deletes what the hub keeps for the
// cluster: its Lease, its Works, and the tombstones among them (deleted
// Works waiting for an agent that will not come back to confirm), and
// finally removes the finalizer. Events on the Cluster say what it waits
// for and when it is done.
package clusterdeletion

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Event reasons on a Cluster.
const (
	ReasonWaitingForBindings = "WaitingForBindings"
	ReasonCleanedUp          = "ClusterCleanedUp"
)

var updateOptions = metav1.UpdateOptions{FieldManager: controller.FieldManager}

// Controller holds deleted Clusters until their workloads have left.
type Controller struct {
	flotilla        flotillaclient.Interface
	kube            kubernetes.Interface
	recorder        controller.Recorder
	logger          *slog.Logger
	clusters        *controller.Shared[*v1alpha1.Cluster]
	bindings        *controller.Shared[*v1alpha1.ResourceBinding]
	clusterBindings *controller.Shared[*v1alpha1.ClusterResourceBinding]
	works           *controller.Shared[*v1alpha1.Work]
	queue           *controller.Queue

	mu sync.Mutex
	// waiting is the binding count last reported per cluster, so that an
	// event says each new count once.
	waiting map[string]int
}

// New returns the controller; it adds its handlers to the shared
// informers, and Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, logger *slog.Logger) *Controller {
	c := &Controller{flotilla: clients.Flotilla, kube: clients.Kube, recorder: recorder, logger: logger.With("controller", "clusterdeletion"),
		clusters: informers.Clusters, bindings: informers.Bindings, clusterBindings: informers.ClusterBindings, works: informers.Works,
		waiting: map[string]int{}}
	c.queue = controller.NewQueue("clusterdeletion", c.reconcile, logger)
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if cur == nil {
			c.mu.Lock()
			delete(c.waiting, old.Name)
			c.mu.Unlock()
			return
		}
		c.queue.Add(cur.Name)
	})
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		c.bindingChanged(specOrNil(old), specOrNil(cur))
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		var o, n *v1alpha1.ResourceBindingSpec
		if old != nil {
			o = &old.Spec
		}
		if cur != nil {
			n = &cur.Spec
		}
		c.bindingChanged(o, n)
	})
	c.works.AddHandler(func(old, cur *v1alpha1.Work) {
		if cur != nil {
			return
		}
		if cluster, ok := cutExecutionNamespace(old.Namespace); ok {
			c.enqueueIfDeleting(cluster)
		}
	})
	return c
}

func specOrNil(b *v1alpha1.ResourceBinding) *v1alpha1.ResourceBindingSpec {
	if b == nil {
		return nil
	}
	return &b.Spec
}

func cutExecutionNamespace(ns string) (string, bool) {
	prefix := v1alpha1.ExecutionNamespace("")
	if len(ns) <= len(prefix) || ns[:len(prefix)] != prefix {
		return "", false
	}
	return ns[len(prefix):], true
}

// bindingChanged queues the clusters being deleted that a binding named
// before or names now.
func (c *Controller) bindingChanged(old, cur *v1alpha1.ResourceBindingSpec) {
	for _, spec := range []*v1alpha1.ResourceBindingSpec{old, cur} {
		for _, name := range ClustersOf(spec) {
			c.enqueueIfDeleting(name)
		}
	}
}

func (c *Controller) enqueueIfDeleting(name string) {
	if cl := c.clusters.Get(name); cl != nil && cl.DeletionTimestamp != nil {
		c.queue.Add(name)
	}
}

// ClustersOf names the clusters a binding spec holds: its placement and
// its graceful eviction tasks.
func ClustersOf(spec *v1alpha1.ResourceBindingSpec) []string {
	if spec == nil {
		return nil
	}
	out := make([]string, 0, len(spec.Clusters)+len(spec.GracefulEvictionTasks))
	for _, tc := range spec.Clusters {
		out = append(out, tc.Name)
	}
	for _, task := range spec.GracefulEvictionTasks {
		out = append(out, task.FromCluster)
	}
	return out
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.clusters, c.bindings, c.clusterBindings, c.works) {
		return
	}
	c.queue.Run(ctx, workers)
}

// bindingsOn counts the bindings that hold the cluster.
func (c *Controller) bindingsOn(cluster string) int {
	n := 0
	for _, b := range c.bindings.List() {
		if slices.Contains(ClustersOf(&b.Spec), cluster) {
			n++
		}
	}
	for _, b := range c.clusterBindings.List() {
		if slices.Contains(ClustersOf(&b.Spec), cluster) {
			n++
		}
	}
	return n
}

func (c *Controller) reconcile(ctx context.Context, name string) error {
	cl := c.clusters.Get(name)
	if cl == nil {
		return nil
	}
	if cl.DeletionTimestamp == nil {
		if slices.Contains(cl.Finalizers, v1alpha1.ClusterFinalizer) {
			return nil
		}
		_, err := c.editFinalizers(ctx, name, func(fs []string) []string { return append(fs, v1alpha1.ClusterFinalizer) }, false)
		return err
	}
	if !slices.Contains(cl.Finalizers, v1alpha1.ClusterFinalizer) {
		return nil
	}
	if n := c.bindingsOn(name); n > 0 {
		c.mu.Lock()
		last, seen := c.waiting[name]
		c.waiting[name] = n
		c.mu.Unlock()
		if !seen || last != n {
			c.event(cl, corev1.EventTypeNormal, ReasonWaitingForBindings, fmt.Sprintf("cluster being deleted: waiting for %d %s to leave", n, plural(n, "binding", "bindings")))
			c.logger.Info("cluster being deleted: waiting for bindings to leave", "cluster", name, "bindings", n)
		}
		return nil // a binding change queues it again
	}
	if err := c.kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the lease of cluster %s: %w", name, err)
	}
	works := c.works.ByIndex(cache.NamespaceIndex, v1alpha1.ExecutionNamespace(name))
	for _, w := range works {
		if err := c.deleteWork(ctx, w); err != nil {
			return err
		}
	}
	if len(works) > 0 {
		return nil // each Work's deletion queues the cluster again
	}
	removed, err := c.editFinalizers(ctx, name, func(fs []string) []string {
		return slices.DeleteFunc(fs, func(f string) bool { return f == v1alpha1.ClusterFinalizer })
	}, true)
	if err != nil || !removed {
		return err
	}
	c.event(cl, corev1.EventTypeNormal, ReasonCleanedUp, "cluster being deleted: no binding left on it; its lease and Works are deleted and it goes")
	c.logger.Info("cluster being deleted: cleaned up, finalizer removed", "cluster", name)
	return nil
}

// deleteWork deletes a Work of a cluster being deleted. Its finalizer
// would keep it as a tombstone for the agent to confirm; the dispatcher
// releases it, since the cluster's agent is cut off and never will.
func (c *Controller) deleteWork(ctx context.Context, w *v1alpha1.Work) error {
	if w.DeletionTimestamp != nil {
		return nil
	}
	err := c.flotilla.FlotillaV1alpha1().Works(w.Namespace).Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &w.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Work %s/%s: %w", w.Namespace, w.Name, err)
	}
	return nil
}

// editFinalizers changes the finalizers of the Cluster as the API server
// has it, retried on conflict. deleting says the change is for a Cluster
// being deleted; one that is not (any more) or is gone is left alone.
// changed says whether this call wrote the change.
func (c *Controller) editFinalizers(ctx context.Context, name string, edit func([]string) []string, deleting bool) (changed bool, err error) {
	clusters := c.flotilla.FlotillaV1alpha1().Clusters()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		cur, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if (cur.DeletionTimestamp != nil) != deleting {
			return nil // it changed meanwhile: its next event queues it
		}
		fs := edit(slices.Clone(cur.Finalizers))
		if slices.Equal(fs, cur.Finalizers) {
			return nil
		}
		cur.Finalizers = fs
		if _, err = clusters.Update(ctx, cur, updateOptions); err == nil {
			changed = true
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finalizers of cluster %s: %w", name, err)
	}
	return changed, nil
}

func (c *Controller) event(cl *v1alpha1.Cluster, eventType, reason, message string) {
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: cl.Name, UID: cl.UID}
	c.recorder.Event(ref, eventType, reason, message)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
