package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/handover"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/lease"
	"github.com/flotilla-io/flotilla/protocol"
)

// Registry holds every cluster's object, lease and health state in memory.
// Renewals and status reports change memory only; one writer goroutine
// writes what changed to the API server in batches, so API writes grow with
// the number of clusters, not with the heartbeat rate. Health deadlines sit
// in one heap served by one timer, so expiry is event-driven.
//
// The hub owns a Cluster's status and its health taints (written by the
// writer goroutine: status through the status subresource, taints as a
// spec update on top of the stored object); operators own labels,
// annotations and the rest of the spec, and their edits reach memory
// through the cluster informer (Observe).
type Registry struct {
	cfg    Config
	clock  clock.WithTicker
	logger *slog.Logger

	clusters flotillav1alpha1.ClusterInterface
	leases   coordinationclient.LeaseInterface
	recorder controller.Recorder

	mu        sync.Mutex
	entries   map[string]*entry
	deadlines *lease.Deadlines
	dirty     map[string]bool // clusters whose object changed since the last flush
	// reportDirty are clusters an agent's status report changed, written
	// at their pace (reportpace.go).
	reportDirty map[string]bool
	// healthDirty are the dirty clusters whose Ready or taints changed:
	// the final flush stores them first.
	healthDirty map[string]bool
	// writing and writingHealth count the cluster objects (and those with
	// a health change) a flush has taken and not yet stored.
	writing, writingHealth int
	dirtyLeas              map[string]bool // leases renewed since the last flush
	// urgentLeases are written with the next cluster flush, ahead of the
	// lease budget: those of clusters whose Ready just changed.
	urgentLeases map[string]bool
	// leaseWritten is when each lease was last written: a flush writes the
	// longest-waiting ones first when the write budget is short.
	leaseWritten map[string]time.Time

	wake chan struct{} // the earliest deadline moved earlier
	// flushSoon asks the writer to store health changes now rather than at
	// the next tick: they are what a restarted hub must not lose.
	flushSoon chan struct{}
	updates   chan updateOp    // registrations and flushes for the writer
	stats     registryCounters // read through Counters
	// clusterWrites counts Cluster writes since the last lease flush.
	clusterWrites atomic.Int64
	// eventLimits bound the events per cluster and reason.
	eventLimits map[eventKey]*rate.Limiter
	// allowAgentWrite, if set, says whether the store takes agent-driven
	// events now (store.Guard).
	allowAgentWrite func() bool
	// leaseObservers are told of renewals and connections (the dashboard).
	leaseObservers []func(cluster string)
	// detected, if set, is told each lease expiry's detection delay
	// (metrics.go).
	detected func(delay time.Duration)
	// supersede, if set, ends a session a newer one on another replica
	// replaced (relay.go).
	supersede func(cluster, session, replica, reason string)
}

// Config tunes the registry.
type Config struct {
	Health health.Config
	// FlushInterval is how often changed clusters and events are written.
	FlushInterval time.Duration
	// LeaseFlushInterval is how often renewed leases are written.
	LeaseFlushInterval time.Duration
	// LeaseWritesPerSecond caps the registry's writes to the API server
	// (0: no cap): leases get what Cluster writes leave of it (at least a
	// tenth), so with many clusters each lease is written less often than
	// every LeaseFlushInterval. Cluster writes are never held back, and
	// health never waits: it is decided in memory.
	LeaseWritesPerSecond float64
	// MaxClockSkew beyond which ClockSynced goes False.
	MaxClockSkew time.Duration
	// HubID names this hub in Cluster status.agent.connectedTo.
	HubID string
	// Handover, if set, is the session table of the leader before this
	// one, fresh enough to judge by (see takeOver).
	Handover *handover.Table
}

// registryCounters are the registry's own counts, updated lock-free and
// read through Counters.
type registryCounters struct {
	renewals, statusReports     atomic.Int64
	storeWrites, storeConflicts atomic.Int64
	transitions, eventsRecorded atomic.Int64
	// unknownTransitions counts the changes of Ready to Unknown: lost
	// agents, or false Unknowns when their agents were alive.
	unknownTransitions atomic.Int64
	eventsSuppressed   atomic.Int64 // beyond the per-reason bound
	apisCoalesced      atomic.Int64 // served API lists replaced before they were stored
	reportsCoalesced   atomic.Int64 // report changes replaced before they were stored
	apisRefused        atomic.Int64 // served API lists refused as too large
	apiEntriesDropped  atomic.Int64 // served API entries Kubernetes would not allow
}

// Counters are what the registry counted since it started.
type Counters struct {
	// Renewals and StatusReports are what agents sent (stamped or applied).
	Renewals, StatusReports int64
	// StoreWrites are the Cluster and Lease objects written, StoreConflicts
	// the writes that met a conflict and were retried.
	StoreWrites, StoreConflicts int64
	// Transitions are changes of a Ready condition, UnknownTransitions
	// those to Unknown.
	Transitions, UnknownTransitions int64
	// EventsRecorded and EventsSuppressed are the events about clusters
	// recorded, and left out beyond the bound per cluster and reason (or
	// while the store is too full).
	EventsRecorded, EventsSuppressed int64
	// APIsCoalesced are lists of served APIs replaced by a newer one
	// before they were stored; ReportsCoalesced status reports whose
	// change was replaced by a newer report's before its paced write.
	APIsCoalesced, ReportsCoalesced int64
	// APIsRefused are lists of served APIs too large to store;
	// APIEntriesDropped entries of lists dropped because Kubernetes would
	// not allow their names.
	APIsRefused, APIEntriesDropped int64
}

// Counters returns the registry's counts so far.
func (r *Registry) Counters() Counters {
	st := &r.stats
	return Counters{
		Renewals: st.renewals.Load(), StatusReports: st.statusReports.Load(),
		StoreWrites: st.storeWrites.Load(), StoreConflicts: st.storeConflicts.Load(),
		Transitions: st.transitions.Load(), UnknownTransitions: st.unknownTransitions.Load(),
		EventsRecorded: st.eventsRecorded.Load(), EventsSuppressed: st.eventsSuppressed.Load(),
		APIsCoalesced: st.apisCoalesced.Load(), ReportsCoalesced: st.reportsCoalesced.Load(),
		APIsRefused: st.apisRefused.Load(), APIEntriesDropped: st.apiEntriesDropped.Load(),
	}
}

// Snapshot is how many clusters the registry holds and how much of what
// changed is not stored yet.
type Snapshot struct {
	Clusters int
	// UnstoredClusters are Cluster objects changed and not yet written (a
	// flush in flight included), UnstoredHealth those of them whose Ready
	// or taints changed; UnstoredLeases are leases renewed and not yet
	// written.
	UnstoredClusters, UnstoredHealth, UnstoredLeases int
}

// Snapshot returns the registry's size and backlog now.
func (r *Registry) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Snapshot{
		Clusters:         len(r.entries),
		UnstoredClusters: len(r.dirty) + len(r.reportDirty) + r.writing,
		UnstoredHealth:   len(r.healthDirty) + r.writingHealth,
		UnstoredLeases:   len(r.dirtyLeas),
	}
}

// entry is one cluster's in-memory state.
type entry struct {
	obj   *v1alpha1.Cluster
	lease *coordinationv1.Lease
	obs   health.Observations
	state health.State
	// session identifies the connection currently serving the cluster;
	// connected is when it began (hub clock).
	session   string
	connected time.Time
	// replica is the election identity of the hub replica whose session
	// serves the cluster (relayed, package relay); empty for this hub's.
	// relayedStamp is that replica's last renewal stamp as it sent it
	// (one ahead of this hub's clock is applied once, as now).
	replica      string
	relayedStamp time.Time
	// clockBackSince is when the agent's clock came back within the
	// tolerated skew while ClockSynced is False (zero otherwise).
	clockBackSince time.Time
	// skewShownAt is when status.agent.clockSkew last changed.
	skewShownAt time.Time
	// apis paces changes of the served APIs; pendingAPIs is the newest
	// list it held back.
	apis        *rate.Limiter
	pendingAPIs *protocol.ServedAPIs
	// reportWrites paces the Cluster writes its status reports cause.
	reportWrites *rate.Limiter
	// renewals and lastStatus are for the dashboard.
	renewals   renewalRing
	lastStatus time.Time
}

// updateOp is work for the writer goroutine.
type updateOp struct {
	register *protocol.Hello           // register a cluster on first connect
	run      func(ctx context.Context) // any other work that must not overlap a flush
	done     chan<- updateOutcome      // receives the result
}

type updateOutcome struct {
	obj *v1alpha1.Cluster
	err error
}

// API is how the registry reaches the API server.
type API struct {
	Flotilla flotillaclient.Interface
	Kube     kubernetes.Interface
	Recorder controller.Recorder
}

// New loads clusters and leases from the API server and evaluates
// them.
func New(ctx context.Context, api API, cfg Config, clk clock.WithTicker, logger *slog.Logger) (*Registry, error) {
	r := &Registry{
		cfg: cfg, clock: clk, logger: logger,
		clusters:     api.Flotilla.FlotillaV1alpha1().Clusters(),
		leases:       api.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace),
		recorder:     api.Recorder,
		entries:      map[string]*entry{},
		deadlines:    lease.NewDeadlines(),
		dirty:        map[string]bool{},
		reportDirty:  map[string]bool{},
		healthDirty:  map[string]bool{},
		dirtyLeas:    map[string]bool{},
		urgentLeases: map[string]bool{},
		leaseWritten: map[string]time.Time{},
		eventLimits:  map[eventKey]*rate.Limiter{},
		wake:         make(chan struct{}, 1),
		flushSoon:    make(chan struct{}, 1),
		updates:      make(chan updateOp),
	}
	if err := controller.EnsureNamespace(ctx, api.Kube, v1alpha1.LeaseNamespace); err != nil {
		return nil, err
	}
	clusters, err := r.clusters.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("load clusters: %w", err)
	}
	leases, err := r.leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases.Items {
		byName[leases.Items[i].Name] = &leases.Items[i]
	}
	var handed map[string]handover.Session
	if cfg.Handover != nil {
		handed = cfg.Handover.Index()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	// Unset, the restart grace counts from here, not from the start of the
	// lead: agents can connect only once the registry is loaded, and
	// loading a fleet of 10,000 clusters takes seconds.
	if r.cfg.Health.HubStarted.IsZero() {
		r.cfg.Health.HubStarted = now
	}
	renewing, notRenewing := 0, 0
	for i := range clusters.Items {
		c := &clusters.Items[i]
		e := restoreEntry(c, byName[c.Name], cfg.Health)
		if s, ok := handed[c.Name]; ok {
			takeOver(e, s, cfg.Handover.TakenAt)
			if s.Renewing {
				renewing++
			} else {
				notRenewing++
			}
		}
		r.entries[c.Name] = e
		if e.lease != nil {
			r.leaseWritten[c.Name] = now
		}
		r.evaluateLocked(c.Name, e, now)
	}
	logger.Info("registry loaded", "clusters", len(clusters.Items), "leases", len(leases.Items))
	if cfg.Handover != nil {
		logger.Info("took over the last leader's sessions: clusters whose agents were renewing get the restart grace to reconnect, the others expire on time",
			"leader", cfg.Handover.Leader, "tableAge", now.Sub(cfg.Handover.TakenAt).Round(time.Millisecond), "renewing", renewing, "notRenewing", notRenewing)
	}
	return r, nil
}

// restoreEntry rebuilds health observations and state from stored objects
// after a hub restart, so a restart neither forgives a sick cluster nor
// restarts its eviction clock.
func restoreEntry(c *v1alpha1.Cluster, l *coordinationv1.Lease, cfg health.Config) *entry {
	e := &entry{obj: c, lease: l, obs: health.Observations{Registered: c.CreationTimestamp.Time, Cordoned: c.Spec.Unschedulable,
		Terminating: c.DeletionTimestamp != nil}}
	if l != nil && l.Spec.RenewTime != nil {
		e.obs.LastRenewal = l.Spec.RenewTime.Time
		e.obs.LeaseDuration = time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionReady)
	if cond == nil {
		return e
	}
	since := cond.LastTransitionTime.Time
	e.state = health.State{Ready: cond.Status, Reason: cond.Reason, Message: cond.Message, Since: since}
	if cond.Status == metav1.ConditionFalse {
		// The API server was last reported unhealthy, for at least the
		// failure threshold: it stays so until the agent says otherwise.
		e.obs.ProbeReported, e.obs.ProbeHealthy = true, false
		e.obs.ProbeSince, e.obs.ProbeMessage = since.Add(-cfg.FailureThreshold), cond.Message
	}
	if cond.Status != metav1.ConditionTrue {
		e.state.NotReadySince = notReadySince(c.Spec.Taints, since, cfg.EvictionTimeout)
	}
	return e
}

// notReadySince is when the cluster stopped being Ready, as its health
// taints record it: the oldest NoSchedule one, or the NoExecute one minus
// the eviction timeout, since NoSchedule taints are replaced when Ready
// goes from False to Unknown. The stored times are to the second, rounded
// down; each is rounded up, so that the NoExecute taint never comes before
// the eviction timeout has run (up to a second late after a restart).
func notReadySince(taints []corev1.Taint, fallback time.Time, evictionTimeout time.Duration) time.Time {
	since := roundUp(fallback)
	for _, t := range taints {
		if (t.Key != v1alpha1.TaintClusterNotReady && t.Key != v1alpha1.TaintClusterUnreachable) || t.TimeAdded == nil {
			continue
		}
		added := roundUp(t.TimeAdded.Time)
		if t.Effect == corev1.TaintEffectNoExecute {
			added = added.Add(-evictionTimeout)
		}
		if added.Before(since) {
			since = added
		}
	}
	return since
}

// roundUp is the latest instant a time stored to the second (rounded
// down) can stand for: the end of its second. A time with a fraction of a
// second was not read from the API and is taken as it is.
func roundUp(t time.Time) time.Time {
	if t.IsZero() || t.Nanosecond() != 0 {
		return t
	}
	return t.Add(time.Second)
}

// evaluateLocked recomputes a cluster's Ready condition and health taints,
// records what changed, and re-arms its deadline.
func (r *Registry) evaluateLocked(name string, e *entry, now time.Time) {
	prev := e.state
	state, decision := health.Evaluate(r.cfg.Health, e.obs, prev, now)
	e.state = state
	changed := false
	if state.Ready != "" && (state.Ready != prev.Ready || state.Reason != prev.Reason || state.Message != prev.Message) {
		meta.SetStatusCondition(&e.obj.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ClusterConditionReady, Status: state.Ready, Reason: state.Reason, Message: state.Message,
			LastTransitionTime: metav1.NewTime(state.Since),
		})
		changed = true
		if state.Ready != prev.Ready {
			r.stats.transitions.Add(1)
			if state.Ready == metav1.ConditionUnknown {
				r.stats.unknownTransitions.Add(1)
			}
			r.observeDetectionLocked(e, state, now)
			if e.lease != nil {
				// The stored lease must show the renewal Ready was judged by.
				r.urgentLeases[name] = true
			}
			eventType := corev1.EventTypeWarning
			if state.Ready == metav1.ConditionTrue {
				eventType = corev1.EventTypeNormal
			}
			r.recordLocked(e.obj, eventType, state.Reason, fmt.Sprintf("Ready %s → %s: %s", displayStatus(prev.Ready), state.Ready, state.Message), now)
			r.logger.Info("cluster readiness changed", "cluster", name, "from", displayStatus(prev.Ready), "to", state.Ready, "reason", state.Reason)
		}
	}
	merged, added, removed := r.cfg.Health.MergeTaints(e.obj.Spec.Taints, decision.Taints, e.obj.TaintOwners(), now)
	for _, t := range added {
		r.recordLocked(e.obj, corev1.EventTypeNormal, "TaintAdded", "added taint "+taintString(t), now)
	}
	for _, t := range removed {
		r.recordLocked(e.obj, corev1.EventTypeNormal, "TaintRemoved", "removed taint "+taintString(t), now)
	}
	if len(added)+len(removed) > 0 {
		e.obj.Spec.Taints = merged
		changed = true
		r.logger.Info("cluster taints changed", "cluster", name, "taints", taintsString(merged))
	}
	if changed {
		r.dirty[name] = true
		r.healthDirty[name] = true
		select {
		case r.flushSoon <- struct{}{}:
		default: // a flush is already requested
		}
	}
	r.armLocked(name, decision.Next)
}

// armLocked sets the cluster's next evaluation and wakes the timer loop if
// that is now the earliest deadline.
func (r *Registry) armLocked(name string, next time.Time) {
	if next.IsZero() {
		r.deadlines.Remove(name)
		return
	}
	before, hadAny := r.deadlines.Next()
	r.deadlines.Set(name, next)
	if !hadAny || next.Before(before) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

func displayStatus(s metav1.ConditionStatus) string {
	if s == "" {
		return "None"
	}
	return string(s)
}

func taintString(t corev1.Taint) string {
	if t.Value != "" {
		return t.Key + "=" + t.Value + ":" + string(t.Effect)
	}
	return t.Key + ":" + string(t.Effect)
}

func taintsString(taints []corev1.Taint) string {
	parts := make([]string, len(taints))
	for i, t := range taints {
		parts[i] = taintString(t)
	}
	return strings.Join(parts, ",")
}

// recordLocked records an event about a cluster (the recorder writes it
// asynchronously).
func (r *Registry) recordLocked(c *v1alpha1.Cluster, eventType, reason, message string, now time.Time) {
	if !r.allowEventLocked(c.Name, reason, now) {
		return
	}
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: c.Name, UID: c.UID}
	r.recorder.Event(ref, eventType, reason, message)
	r.stats.eventsRecorded.Add(1)
}

// Run serves deadlines and writes changes until ctx ends; a final flush
// stores what changed last.
func (r *Registry) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { r.runDeadlines(ctx) })
	r.runWriter(ctx)
	wg.Wait()
}

// runDeadlines evaluates clusters when their deadline comes.
func (r *Registry) runDeadlines(ctx context.Context) {
	for {
		r.mu.Lock()
		next, ok := r.deadlines.Next()
		r.mu.Unlock()
		var timer clock.Timer
		var fire <-chan time.Time
		if ok {
			timer = r.clock.NewTimer(next.Sub(r.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-fire:
			r.fireDue()
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// fireDue evaluates every cluster whose deadline has come.
func (r *Registry) fireDue() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	for _, name := range r.deadlines.PopDue(now) {
		if e, ok := r.entries[name]; ok {
			r.evaluateLocked(name, e, now)
		}
	}
}

// ErrUnknownCluster is returned for renewals and reports of clusters that
// did not say hello.
var ErrUnknownCluster = errors.New("unknown cluster")

// sortedNames returns the registered cluster names in order.
func (r *Registry) sortedNamesLocked() []string {
	names := make([]string, 0, len(r.entries))
	for name := range r.entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
