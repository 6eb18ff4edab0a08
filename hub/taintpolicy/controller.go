package taintpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Event reasons, Karmada's where Karmada has one.
const (
	ReasonTaintClusterSucceed = "TaintClusterSucceed"
	ReasonTaintClusterFailed  = "TaintClusterFailed"
	ReasonHubOwnedTaint       = "HubOwnedTaint"
)

// Operations an Observer hears of.
const (
	OperationAdded   = "added"
	OperationRemoved = "removed"
)

// Observer hears of every taint a policy added to or removed from a
// cluster, once written.
type Observer func(policy, operation string)

// Controller applies ClusterTaintPolicies to Clusters.
type Controller struct {
	client   flotillaclient.Interface
	recorder controller.Recorder
	clock    clock.Clock
	logger   *slog.Logger
	opts     Options
	clusters *controller.Shared[*v1alpha1.Cluster]
	policies *controller.Shared[*v1alpha1.ClusterTaintPolicy]
	queue    *controller.Queue
	observe  Observer
}

// New returns a controller that reads Clusters and ClusterTaintPolicies
// from the shared informers and writes Clusters through clients. It adds
// its handlers to the informers; Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, clk clock.WithTicker, logger *slog.Logger, opts Options) *Controller {
	c := &Controller{client: clients.Flotilla, recorder: recorder, clock: clk, logger: logger.With("controller", "taint-policy"),
		opts: opts, clusters: informers.Clusters, policies: informers.TaintPolicies, observe: func(string, string) {}}
	c.queue = controller.NewQueueWithClock("taint-policy", c.reconcile, logger, clk)
	c.clusters.AddHandler(func(old, cur *v1alpha1.Cluster) {
		if cur != nil && (old == nil || clusterChanged(old, cur)) {
			c.queue.Add(cur.Name)
		}
	})
	c.policies.AddHandler(func(old, cur *v1alpha1.ClusterTaintPolicy) {
		if cur != nil && (old == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec)) {
			c.policyChanged(cur)
		}
	})
	return c
}

// SetObserver sets what hears of the taints written; call before Run.
func (c *Controller) SetObserver(o Observer) { c.observe = o }

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	if !controller.StartAndSync(ctx, c.clusters, c.policies) {
		return
	}
	c.queue.Run(ctx, workers)
}

// clusterChanged reports a change that can change what the policies do:
// a condition's status, or what targetClusters select by (labels, name
// fields).
func clusterChanged(old, cur *v1alpha1.Cluster) bool {
	status := func(c *v1alpha1.Cluster) map[string]metav1.ConditionStatus {
		out := make(map[string]metav1.ConditionStatus, len(c.Status.Conditions))
		for _, cond := range c.Status.Conditions {
			out[cond.Type] = cond.Status
		}
		return out
	}
	return !maps.Equal(status(old), status(cur)) || !maps.Equal(old.Labels, cur.Labels) ||
		old.Spec.Provider != cur.Spec.Provider || old.Spec.Region != cur.Spec.Region || old.Spec.Zone != cur.Spec.Zone
}

// policyChanged queues the clusters a new or changed policy targets, and
// warns when it names a taint the hub keeps for itself.
func (c *Controller) policyChanged(p *v1alpha1.ClusterTaintPolicy) {
	for _, cl := range c.clusters.List() {
		if ok, err := targets(p, cl); err == nil && ok {
			c.queue.Add(cl.Name)
		}
	}
	var owned []string
	for _, pt := range p.Spec.Taints {
		t := corev1.Taint{Key: v1alpha1.NormalTaintKey(pt.Key), Effect: pt.Effect}
		if hubOwns(t, c.opts) {
			owned = append(owned, v1alpha1.TaintOwnerKey(t))
		}
	}
	if len(owned) > 0 {
		c.recorder.Event(policyRef(p), corev1.EventTypeWarning, ReasonHubOwnedTaint, fmt.Sprintf(
			"the hub sets %s itself and this policy leaves it alone; to have policies set the not-ready and unreachable NoExecute taints, as Karmada 1.14 does, run the hub with --health-no-execute-taints=false",
			strings.Join(owned, ", ")))
	}
}

// reconcile applies the policies to one cluster and writes its taints if
// they change.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	cl := c.clusters.Get(name)
	if cl == nil || cl.DeletionTimestamp != nil {
		return nil
	}
	res := Apply(cl, c.policies.List(), c.opts, c.clock.Now())
	if len(res.Changes) == 0 {
		return nil
	}
	written, res, err := c.write(ctx, cl, res)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		c.recorder.Event(clusterRef(cl), corev1.EventTypeWarning, ReasonTaintClusterFailed,
			fmt.Sprintf("cannot write the taints of %s: %v", describeChanges(res.Changes), err))
		return fmt.Errorf("write taints of cluster %s: %w", name, err)
	}
	if written == nil {
		return nil
	}
	for _, ch := range res.Changes {
		c.recordChange(written, ch)
	}
	c.logger.Info("cluster taints changed by policies", "cluster", name, "changes", describeChanges(res.Changes))
	return nil
}

// write stores res on the cluster: an Update over the version cl is, and
// on a conflict the policies applied again to the API server's latest
// version. It returns the cluster as written and what was written, or a
// nil cluster when the latest version needs no change.
func (c *Controller) write(ctx context.Context, cl *v1alpha1.Cluster, res Result) (*v1alpha1.Cluster, Result, error) {
	var written *v1alpha1.Cluster
	latest := cl
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			var err error
			if latest, err = c.client.FlotillaV1alpha1().Clusters().Get(ctx, cl.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if res = Apply(latest, c.policies.List(), c.opts, c.clock.Now()); len(res.Changes) == 0 {
				written = nil
				return nil
			}
		}
		first = false
		next, err := withResult(latest, res)
		if err != nil {
			return err
		}
		written, err = c.client.FlotillaV1alpha1().Clusters().Update(ctx, next, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		return err
	})
	return written, res, err
}

// withResult is a copy of cl with res's taints and owners.
func withResult(cl *v1alpha1.Cluster, res Result) (*v1alpha1.Cluster, error) {
	next := cl.DeepCopy()
	next.Spec.Taints = res.Taints
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	if len(res.Owners) == 0 {
		delete(next.Annotations, v1alpha1.AnnotationTaintPolicies)
		return next, nil
	}
	owners, err := json.Marshal(res.Owners)
	if err != nil {
		return nil, fmt.Errorf("encode taint owners: %w", err)
	}
	next.Annotations[v1alpha1.AnnotationTaintPolicies] = string(owners)
	return next, nil
}

// recordChange records one change written: events on the cluster and on
// the policy (when it still exists), a log line and the observer.
func (c *Controller) recordChange(cl *v1alpha1.Cluster, ch Change) {
	verb, operation, conditions := "added taint %s to", OperationAdded, "addOnConditions"
	if ch.Removed {
		verb, operation, conditions = "removed taint %s from", OperationRemoved, "removeOnConditions"
	}
	message := fmt.Sprintf("ClusterTaintPolicy %s "+verb+" cluster %s: its %s matched", ch.Policy, taintString(ch.Taint), cl.Name, conditions)
	c.recorder.Event(clusterRef(cl), corev1.EventTypeNormal, ReasonTaintClusterSucceed, message)
	if p := c.policies.Get(ch.Policy); p != nil {
		c.recorder.Event(policyRef(p), corev1.EventTypeNormal, ReasonTaintClusterSucceed, message)
	}
	c.observe(ch.Policy, operation)
}

func describeChanges(changes []Change) string {
	parts := make([]string, len(changes))
	for i, ch := range changes {
		op := "+"
		if ch.Removed {
			op = "-"
		}
		parts[i] = fmt.Sprintf("%s%s (ClusterTaintPolicy %s)", op, taintString(ch.Taint), ch.Policy)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func taintString(t corev1.Taint) string {
	if t.Value != "" {
		return t.Key + "=" + t.Value + ":" + string(t.Effect)
	}
	return t.Key + ":" + string(t.Effect)
}

func clusterRef(cl *v1alpha1.Cluster) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: cl.Name, UID: cl.UID}
}

func policyRef(p *v1alpha1.ClusterTaintPolicy) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindClusterTaintPolicy, Name: p.Name, UID: p.UID}
}
