package hub

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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/lease"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/store"
)

// Registry holds every cluster's object, lease and health state in memory.
// Renewals and status reports change memory only; one writer goroutine
// stores what changed in batches, so store writes grow with the number of
// clusters, not with the heartbeat rate. Health deadlines sit in one heap
// served by one timer, so expiry is event-driven.
//
// Cluster objects are written only by the writer goroutine, which keeps the
// in-memory resourceVersion equal to the stored one; API updates go through
// it too and get optimistic concurrency against that version.
type Registry struct {
	cfg    RegistryConfig
	clock  clock.WithTicker
	logger *slog.Logger

	clusters *store.Resource[v1alpha1.Cluster, *v1alpha1.Cluster]
	leases   *store.Resource[coordinationv1.Lease, *coordinationv1.Lease]
	events   *store.Resource[corev1.Event, *corev1.Event]

	mu        sync.Mutex
	entries   map[string]*entry
	deadlines *lease.Deadlines
	dirty     map[string]bool // clusters whose object changed since the last flush
	dirtyLeas map[string]bool // leases renewed since the last flush
	pending   []*corev1.Event // recorded, not yet being written
	inflight  []*corev1.Event // being written by the current flush

	wake chan struct{} // the earliest deadline moved earlier
	// flushSoon asks the writer to store health changes now rather than at
	// the next tick: they are what a restarted hub must not lose.
	flushSoon chan struct{}
	// writing counts cluster objects taken by a flush and not yet stored.
	writing int
	updates chan updateOp    // API updates and registrations for the writer
	stats   registryCounters // read by the stats endpoint and the load tool
}

// RegistryConfig tunes the registry.
type RegistryConfig struct {
	Health health.Config
	// FlushInterval is how often changed clusters and events are written.
	FlushInterval time.Duration
	// LeaseFlushInterval is how often renewed leases are written.
	LeaseFlushInterval time.Duration
	// EventTTL is how long events are kept; zero keeps them forever.
	EventTTL time.Duration
	// MaxClockSkew beyond which ClockSynced goes False.
	MaxClockSkew time.Duration
	// HubID names this hub in Cluster status.agent.connectedTo.
	HubID string
}

type registryCounters struct {
	renewals, statusReports     atomic.Int64
	storeWrites, storeTxns      atomic.Int64
	transitions, eventsRecorded atomic.Int64
}

// entry is one cluster's in-memory state.
type entry struct {
	obj   *v1alpha1.Cluster
	lease *coordinationv1.Lease
	obs   health.Observations
	state health.State
	// session identifies the connection currently serving the cluster.
	session string
}

// updateOp is work for the writer goroutine.
type updateOp struct {
	register *protocol.Hello           // register a cluster on first connect
	update   *v1alpha1.Cluster         // an API update
	run      func(ctx context.Context) // any other work that must not overlap a flush
	done     chan<- updateOutcome      // receives the result
}

type updateOutcome struct {
	obj *v1alpha1.Cluster
	err error
}

// eventNamespace holds events about cluster-scoped objects, as in Kubernetes.
const eventNamespace = metav1.NamespaceDefault

// NewRegistry loads clusters and leases from the store and evaluates them.
func NewRegistry(ctx context.Context, s *store.Store, cfg RegistryConfig, clk clock.WithTicker, logger *slog.Logger) (*Registry, error) {
	r := &Registry{
		cfg: cfg, clock: clk, logger: logger,
		clusters:  store.For[v1alpha1.Cluster](s, ClusterKind),
		leases:    store.For[coordinationv1.Lease](s, LeaseKind),
		events:    store.For[corev1.Event](s, EventKind),
		entries:   map[string]*entry{},
		deadlines: lease.NewDeadlines(),
		dirty:     map[string]bool{},
		dirtyLeas: map[string]bool{},
		wake:      make(chan struct{}, 1),
		flushSoon: make(chan struct{}, 1),
		updates:   make(chan updateOp),
	}
	clusters, _, err := r.clusters.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("load clusters: %w", err)
	}
	leases, _, err := r.leases.List(ctx, v1alpha1.LeaseNamespace)
	if err != nil {
		return nil, fmt.Errorf("load leases: %w", err)
	}
	byName := map[string]*coordinationv1.Lease{}
	for _, l := range leases {
		byName[l.Name] = l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	for _, c := range clusters {
		e := restoreEntry(c, byName[c.Name], cfg.Health)
		r.entries[c.Name] = e
		r.evaluateLocked(c.Name, e, now)
	}
	logger.Info("registry loaded", "clusters", len(clusters), "leases", len(leases))
	return r, nil
}

// restoreEntry rebuilds health observations and state from stored objects
// after a hub restart, so a restart neither forgives a sick cluster nor
// restarts its eviction clock.
func restoreEntry(c *v1alpha1.Cluster, l *coordinationv1.Lease, cfg health.Config) *entry {
	e := &entry{obj: c, lease: l, obs: health.Observations{Registered: c.CreationTimestamp.Time, Cordoned: c.Spec.Unschedulable}}
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
// goes from False to Unknown.
func notReadySince(taints []corev1.Taint, fallback time.Time, evictionTimeout time.Duration) time.Time {
	since := fallback
	for _, t := range taints {
		if (t.Key != v1alpha1.TaintClusterNotReady && t.Key != v1alpha1.TaintClusterUnreachable) || t.TimeAdded == nil {
			continue
		}
		added := t.TimeAdded.Time
		if t.Effect == corev1.TaintEffectNoExecute {
			added = added.Add(-evictionTimeout)
		}
		if added.Before(since) {
			since = added
		}
	}
	return since
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
			eventType := corev1.EventTypeWarning
			if state.Ready == metav1.ConditionTrue {
				eventType = corev1.EventTypeNormal
			}
			r.recordLocked(e.obj, eventType, state.Reason, fmt.Sprintf("Ready %s → %s: %s", displayStatus(prev.Ready), state.Ready, state.Message), now)
			r.logger.Info("cluster readiness changed", "cluster", name, "from", displayStatus(prev.Ready), "to", state.Ready, "reason", state.Reason)
		}
	}
	merged, added, removed := health.MergeTaints(e.obj.Spec.Taints, decision.Taints, now)
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

// recordLocked queues an event about a cluster for the next flush.
func (r *Registry) recordLocked(c *v1alpha1.Cluster, eventType, reason, message string, now time.Time) {
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: c.Name, UID: c.UID}
	r.appendEventLocked(ref, eventType, reason, message, now)
}

// Event records an event about any object (bindings, Works...); it is
// stored with the cluster events at the next flush. It implements
// controller.Recorder.
func (r *Registry) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.appendEventLocked(ref, eventType, reason, message, r.clock.Now())
}

func (r *Registry) appendEventLocked(ref corev1.ObjectReference, eventType, reason, message string, now time.Time) {
	stamp := metav1.NewTime(now)
	r.pending = append(r.pending, &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		// uid and creation time are set here, not by the store, because the
		// API may read the event while the writer stores it.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()+int64(len(r.pending))), Namespace: eventNamespace,
			UID: uuid.NewUUID(), CreationTimestamp: stamp},
		InvolvedObject: ref,
		Reason:         reason, Message: message, Type: eventType,
		Source:         corev1.EventSource{Component: "flotilla-hub"},
		FirstTimestamp: stamp, LastTimestamp: stamp, Count: 1,
		// EventTime keeps microseconds, so detection latency can be measured.
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: "flotilla.io/hub", ReportingInstance: r.cfg.HubID,
	})
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
