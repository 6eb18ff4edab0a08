package registry

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/lease"
	"github.com/flotilla-io/flotilla/protocol"
)

// Connect registers the cluster on its agent's first hello and records the
// session now serving it, from remote over transport.
func (r *Registry) Connect(ctx context.Context, hello *protocol.Hello, session, remote, transport string) error {
	r.mu.Lock()
	_, known := r.entries[hello.ClusterName]
	r.mu.Unlock()
	if !known {
		if _, err := r.submit(ctx, updateOp{register: hello}); err != nil {
			return fmt.Errorf("register cluster %s: %w", hello.ClusterName, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connectLocked(hello.ClusterName, r.entries[hello.ClusterName], connection{session: session, remote: remote, transport: transport,
		agentVersion: hello.AgentVersion, leaseSeconds: hello.LeaseDurationSeconds, hubID: r.cfg.HubID}, r.clock.Now())
	return nil
}

// connection is a session as Connect records it: on this replica, or on
// the replica named by replica (relayed).
type connection struct {
	session, remote, transport, agentVersion string
	leaseSeconds                             int32
	// hubID is the serving replica's --hub-id; replica its election
	// identity, empty for a session of this hub.
	hubID, replica string
}

// connectLocked records that c now serves e.
func (r *Registry) connectLocked(name string, e *entry, c connection, now time.Time) {
	if e.session != "" && e.session != c.session && e.replica != c.replica {
		// A replica replaces its own sessions itself (the agent server claims sessions by cluster).
		r.supersedeLocked(e.obj, name, e.session, e.replica, c, now)
	}
	e.session, e.connected, e.replica, e.relayedStamp = c.session, now, c.replica, time.Time{}
	e.obs.NoRestartGrace = false // an agent serves it again
	e.obs.ReplicaLostAt = time.Time{}
	// The lease granted, not the one asked for: restart grace and renewal
	// bookkeeping must use what the agent actually renews against.
	e.obs.LeaseDuration = time.Duration(health.GrantedLeaseSeconds(c.leaseSeconds, r.cfg.Health)) * time.Second
	if e.obj.Status.Agent == nil {
		// Registered by a join or certs issue, or here: either way this
		// is the cluster's first agent.
		r.recordLocked(e.obj, corev1.EventTypeNormal, "Registered", "cluster registered: its agent connected for the first time", now)
	}
	connectedAt := metav1.NewTime(now)
	e.obj.Status.Agent = &v1alpha1.AgentStatus{Version: c.agentVersion, ConnectedTo: c.hubID, ConnectedAt: &connectedAt, Transport: c.transport, ClockSkew: agentSkew(e)}
	r.recordLocked(e.obj, corev1.EventTypeNormal, "AgentConnected", fmt.Sprintf("agent %s connected from %s over %s", c.agentVersion, c.remote, c.transport), now)
	r.dirty[name] = true
	r.leaseChangedLocked(name)
}

func agentSkew(e *entry) string {
	if e.obj.Status.Agent == nil {
		return ""
	}
	return e.obj.Status.Agent.ClockSkew
}

// Disconnect records that a session ended. Health does not change here: the
// lease expiry decides that.
func (r *Registry) Disconnect(cluster, session, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disconnectLocked(cluster, session, reason)
}

// disconnectLocked is Disconnect under the lock.
func (r *Registry) disconnectLocked(cluster, session, reason string) {
	e, ok := r.entries[cluster]
	if !ok || e.session != session {
		return // a newer session already took over
	}
	e.session, e.replica = "", ""
	if e.obj.Status.Agent != nil {
		e.obj.Status.Agent.ConnectedTo = ""
	}
	r.recordLocked(e.obj, corev1.EventTypeNormal, "AgentDisconnected", "agent disconnected: "+reason, r.clock.Now())
	r.dirty[cluster] = true
	r.leaseChangedLocked(cluster)
}

// DropSession drops a session the hub closed for its own shutdown, writing and
// recording nothing: the agent's next Connect, here or on another
// replica, is what gets recorded.
func (r *Registry) DropSession(cluster, session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[cluster]; ok && e.session == session {
		e.session, e.replica = "", ""
	}
}

// Renew stamps a lease renewal with the hub's clock and returns that time
// for the acknowledgement.
func (r *Registry) Renew(cluster, holder string, agentTime time.Time) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[cluster]
	if !ok {
		return time.Time{}, fmt.Errorf("renew lease of %s: %w", cluster, ErrUnknownCluster)
	}
	now := r.clock.Now()
	r.renewLocked(cluster, e, holder, agentTime, now, now)
	return now, nil
}

// renewLocked records a renewal stamped at stamp (now, or a moment before
// on the replica that served it).
func (r *Registry) renewLocked(cluster string, e *entry, holder string, agentTime, stamp, now time.Time) {
	duration := e.obs.LeaseDuration
	if duration == 0 {
		duration = r.cfg.Health.DefaultLeaseDuration
	}
	if e.lease == nil {
		e.lease = lease.New(cluster, holder, duration, stamp)
	} else {
		lease.Renew(e.lease, holder, duration, stamp)
	}
	e.obs.LastRenewal = stamp
	e.obs.ReplicaLostAt = time.Time{}
	e.renewals.add(stamp)
	r.leaseChangedLocked(cluster)
	r.dirtyLeas[cluster] = true
	r.observeSkewLocked(cluster, e, agentTime.Sub(stamp), now)
	r.evaluateLocked(cluster, e, now)
	r.stats.renewals.Add(1)
}

// clockSyncedHold is how long an agent's clock must stay within the
// tolerated skew before ClockSynced goes back to True: a clock that flaps
// around the bound makes one transition, not one per renewal.
const clockSyncedHold = time.Minute

// observeSkewLocked keeps ClockSynced and status.agent.clockSkew current.
// The skew is kept to whole seconds so that jitter does not cause writes.
// ClockSynced goes False at the first skewed renewal and True again only
// once the clock has stayed within bounds for clockSyncedHold.
func (r *Registry) observeSkewLocked(cluster string, e *entry, skew time.Duration, now time.Time) {
	rounded := skew.Round(time.Second)
	status, reason, message := metav1.ConditionTrue, v1alpha1.ReasonClockSynced, "agent clock is within "+r.cfg.MaxClockSkew.String()+" of the hub's"
	if skew > r.cfg.MaxClockSkew || -skew > r.cfg.MaxClockSkew {
		direction := "ahead of"
		if skew < 0 {
			direction = "behind"
		}
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonClockSkewed
		message = fmt.Sprintf("agent clock is %v %s the hub's (tolerated: %v); lease times use the hub's clock", skew.Abs().Round(100*time.Millisecond), direction, r.cfg.MaxClockSkew)
	}
	prev := meta.FindStatusCondition(e.obj.Status.Conditions, v1alpha1.ClusterConditionClockSynced)
	switch {
	case status == metav1.ConditionFalse:
		e.clockBackSince = time.Time{}
	case prev == nil || prev.Status != metav1.ConditionFalse:
	case e.clockBackSince.IsZero():
		e.clockBackSince = now
		status = metav1.ConditionFalse // not yet: it may flap back
	case now.Sub(e.clockBackSince) < clockSyncedHold:
		status = metav1.ConditionFalse
	default:
		e.clockBackSince = time.Time{}
	}
	transition := prev == nil || prev.Status != status
	if transition {
		meta.SetStatusCondition(&e.obj.Status.Conditions, metav1.Condition{Type: v1alpha1.ClusterConditionClockSynced, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)})
		r.dirty[cluster] = true
		if status == metav1.ConditionFalse {
			r.recordLocked(e.obj, corev1.EventTypeWarning, reason, message, now)
		}
	}
	// The skew shown changes with a transition, else at most once per
	// clockSkewShown: a flapping clock must not rewrite the Cluster at
	// every flush.
	if a := e.obj.Status.Agent; a != nil && a.ClockSkew != rounded.String() && (transition || a.ClockSkew == "" || now.Sub(e.skewShownAt) >= clockSkewShown) {
		a.ClockSkew = rounded.String()
		e.skewShownAt = now
		r.dirty[cluster] = true
	}
}

// clockSkewShown is how often status.agent.clockSkew may change without a
// ClockSynced transition.
const clockSkewShown = time.Minute

// Status applies a cluster status report from the agent.
func (r *Registry) Status(cluster string, report *protocol.ClusterStatus) error {
	allocatable, allocated, err := reportResources(report)
	if err != nil {
		return fmt.Errorf("status of %s: %w", cluster, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[cluster]
	if !ok {
		return fmt.Errorf("status of %s: %w", cluster, ErrUnknownCluster)
	}
	r.statusLocked(cluster, e, report, allocatable, allocated, r.clock.Now())
	return nil
}

// statusLocked applies a report whose resources parsed.
func (r *Registry) statusLocked(cluster string, e *entry, report *protocol.ClusterStatus, allocatable, allocated corev1.ResourceList, now time.Time) {
	if !e.obs.ProbeReported || e.obs.ProbeHealthy != report.APIServerHealthy {
		e.obs.ProbeSince = now
	}
	e.obs.ProbeReported, e.obs.ProbeHealthy, e.obs.ProbeMessage = true, report.APIServerHealthy, report.HealthMessage
	e.lastStatus = now
	r.leaseChangedLocked(cluster)

	// Field by field on the stored status: most reports change nothing,
	// and a deep copy and comparison of the whole status cost more than
	// the rest of a report.
	st := &e.obj.Status
	changed := false
	if report.KubernetesVersion != "" && report.KubernetesVersion != st.KubernetesVersion {
		st.KubernetesVersion, changed = report.KubernetesVersion, true
	}
	why := implausible(report, allocatable, allocated)
	if r.resourcesPlausibleLocked(cluster, e, why, &st.Conditions) {
		changed = true
	}
	switch {
	case why != "":
		// Nothing of it feeds scheduling, nor an earlier summary.
		if st.NodeSummary != nil || st.ResourceSummary != nil {
			st.NodeSummary, st.ResourceSummary, changed = nil, nil, true
		}
	case report.NodesTotal > 0 || report.APIServerHealthy:
		nodes := v1alpha1.NodeSummary{TotalNum: report.NodesTotal, ReadyNum: report.NodesReady}
		if st.NodeSummary == nil || *st.NodeSummary != nodes {
			st.NodeSummary, changed = &nodes, true
		}
		if st.ResourceSummary == nil || !sameResources(st.ResourceSummary.Allocatable, allocatable) || !sameResources(st.ResourceSummary.Allocated, allocated) {
			st.ResourceSummary, changed = &v1alpha1.ResourceSummary{Allocatable: allocatable, Allocated: allocated}, true
		}
	}
	r.reportConditionsLocked(cluster, e, report, why == "", now)
	if apis := r.admitServedAPIsLocked(cluster, e, r.servedAPIsLocked(e, report.ServedAPIs, now), now); apis != nil {
		if next := apiEnablements(apis); !equality.Semantic.DeepEqual(next, st.APIEnablements) {
			st.APIEnablements, changed = next, true
		}
	}
	if changed {
		r.reportChangedLocked(cluster)
	}
	r.stats.statusReports.Add(1)
	r.evaluateLocked(cluster, e, now)
}

// apiEnablements converts the agent's served APIs to the Cluster's form.
func apiEnablements(apis *protocol.ServedAPIs) []v1alpha1.APIEnablement {
	out := make([]v1alpha1.APIEnablement, len(apis.Items))
	for i, gv := range apis.Items {
		out[i].GroupVersion = gv.GroupVersion
		for _, r := range gv.Resources {
			out[i].Resources = append(out[i].Resources, v1alpha1.APIResource{Name: r.Name, Kind: r.Kind})
		}
	}
	return out
}

// reportResources parses a report's allocatable and allocated resources.
func reportResources(report *protocol.ClusterStatus) (allocatable, allocated corev1.ResourceList, err error) {
	if allocatable, err = resourceList(report.Allocatable); err != nil {
		return nil, nil, fmt.Errorf("allocatable: %w", err)
	}
	if allocated, err = resourceList(report.Allocated); err != nil {
		return nil, nil, fmt.Errorf("allocated: %w", err)
	}
	return allocatable, allocated, nil
}

func resourceList(in map[string]string) (corev1.ResourceList, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(corev1.ResourceList, len(in))
	for name, value := range in {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", name, value, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// sameResources says whether two resource lists hold the same quantities
// (nil and empty alike, as the API's semantic equality has them).
func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		other, ok := b[name]
		if !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// GetCluster returns a copy of one cluster, or NotFound.
func (r *Registry) GetCluster(name string) (*v1alpha1.Cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		return nil, apierrors.NewNotFound(ClusterResource, name)
	}
	return e.obj.DeepCopy(), nil
}

// GetLease returns a copy of one lease, or NotFound.
func (r *Registry) GetLease(name string) (*coordinationv1.Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok || e.lease == nil {
		return nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), name)
	}
	return e.lease.DeepCopy(), nil
}

// submit hands an operation to the writer goroutine and waits for it.
func (r *Registry) submit(ctx context.Context, op updateOp) (*v1alpha1.Cluster, error) {
	done := make(chan updateOutcome, 1)
	op.done = done
	select {
	case r.updates <- op:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case out := <-done:
		return out.obj, out.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
