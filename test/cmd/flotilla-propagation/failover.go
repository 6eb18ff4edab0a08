package main

// The failover measurement (--failover): N Deployments of one replica per
// cluster (Divided by equal static weights), member-1's agent killed, and
// from the hub's events on the bindings the time of each eviction
// ("Evicted", the decision) and of each task end ("EvictionTaskEnded": the
// hub saw every cluster of the new placement run the workload Healthy,
// i.e. the replacement replicas Available).
//
// Events: the hub keeps every event (no cap, no deduplication, names from
// a nanosecond timestamp) until --event-ttl (1 h, pruned every 10 min);
// unstored ones are listed from memory. They can only be lost if the hub
// dies before a flush, or in a run longer than the TTL. The tool checks
// the counts against the hub's counters and, for bindings without events,
// falls back to what it saw in the binding specs (the eviction task's
// creationTimestamp, second precision; the task's end, at poll
// granularity).

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/test/membercluster"
	"github.com/flotilla-io/flotilla/test/procstat"
)

// failoverGroup labels the failover run's Deployments (bench=failover) and
// names its policy.
const failoverGroup = "failover"

type failoverOptions struct {
	enabled                      bool
	grace, evictionTimeout       time.Duration
	timeout, poll, progressEvery time.Duration
	checks                       int
}

func (f *failoverOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "failover", false, "measure cluster failover instead of the apply → Available latency: once the --bindings Deployments run, kill member-1's agent and time the evictions and the replacements")
	fs.DurationVar(&f.grace, "failover-grace", 8*time.Second, "the hub's --cluster-monitor-grace-period in the failover run")
	fs.DurationVar(&f.evictionTimeout, "failover-eviction-timeout", 2*time.Second, "the hub's --failover-eviction-timeout in the failover run")
	fs.DurationVar(&f.timeout, "failover-timeout", 20*time.Minute, "how long to wait, after the kill, for every eviction task to end")
	fs.DurationVar(&f.poll, "failover-poll", 5*time.Second, "how often the bindings are listed during the failover, for the fallback should events be missing (0: never)")
	fs.DurationVar(&f.progressEvery, "failover-progress", 5*time.Second, "how often the failover prints a progress line")
	fs.IntVar(&f.checks, "failover-checks", 5, "bindings cross-checked directly in the member clusters afterwards")
}

func (f *failoverOptions) validate(clusters int) error {
	switch {
	case clusters < 2:
		return fmt.Errorf("--failover needs at least 2 clusters (--clusters %d)", clusters)
	case f.grace <= 0 || f.evictionTimeout < 0 || f.timeout <= 0 || f.progressEvery <= 0 || f.poll < 0:
		return fmt.Errorf("--failover-grace, --failover-timeout and --failover-progress must be positive, --failover-eviction-timeout and --failover-poll not negative")
	}
	return nil
}

// hubArgs are the hub flags of the failover run: evict at once (no
// toleration) after a short grace. The rates are the hub's defaults: the
// one failed cluster is admitted to eviction at once, and every binding
// on it goes as fast as the API allows.
func (f *failoverOptions) hubArgs() []string {
	if !f.enabled {
		return nil
	}
	return []string{
		"--default-unreachable-toleration-seconds=0",
		"--default-not-ready-toleration-seconds=0",
		"--cluster-monitor-grace-period=" + f.grace.String(),
		"--failover-eviction-timeout=" + f.evictionTimeout.String(),
		"--graceful-eviction-timeout=10m",
	}
}

// failoverPolicy divides the failover Deployments over the clusters by
// equal static weights.
func failoverPolicy(clusters []string) map[string]any {
	weights := make([]any, len(clusters))
	for i, c := range clusters {
		weights[i] = map[string]any{"targetCluster": map[string]any{"clusterNames": []any{c}}, "weight": 1}
	}
	return map[string]any{
		"apiVersion": "flotilla.io/v1alpha1", "kind": "PropagationPolicy",
		"metadata": map[string]any{"name": failoverGroup, "namespace": "bench"},
		"spec": map[string]any{
			"resourceSelectors": []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"bench": failoverGroup}}}},
			"placement": map[string]any{
				"clusterAffinity": map[string]any{"clusterNames": clusters},
				"replicaScheduling": map[string]any{"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
					"weightPreference": map[string]any{"staticWeightList": weights}},
			},
		},
	}
}

// failoverDeployment is a Deployment of one replica per cluster with small
// requests.
func failoverDeployment(name string, replicas int) map[string]any {
	d := deployment(name, failoverGroup, replicas)
	pod := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	pod["containers"].([]any)[0].(map[string]any)["resources"] = map[string]any{
		"requests": map[string]any{"cpu": "10m", "memory": "16Mi"},
	}
	return d
}

// runFailover sets up the Deployments, measures the failover and prints
// the report.
func runFailover(ctx context.Context, h *fleetProcs, env *membercluster.Environment, o options, names []string) error {
	if err := h.apply(ctx, []any{failoverPolicy(names)}); err != nil {
		return fmt.Errorf("apply the failover policy: %w", err)
	}
	replicas := len(names)
	logf("failover: applying %d Deployments of %d replicas (1 per cluster), then waiting until all are Available", o.bindings, replicas)
	through, err := measureThroughput(ctx, h, o, failoverGroup, func(name string) map[string]any { return failoverDeployment(name, replicas) })
	if err != nil {
		return fmt.Errorf("set up the failover workload: %w", err)
	}
	rep, err := measureFailover(ctx, h, env, o, names)
	if rep != nil {
		rep.setup = through
		rep.print(o, names)
	}
	if err == nil && o.writeCapacity > 0 {
		logf("measuring the API server's write capacity for the failover's mix for %v", o.writeCapacity)
		c := h.measureCapacity(ctx, rep.writes, o.writeCapacity, names[len(names)-1])
		c.print(rep.writes.perUnit(int(rep.statsEvictions)), "eviction", rep.capacityRates()...)
	}
	return err
}

// failoverReport is what measureFailover found; it may be partial when it
// returns an error.
type failoverReport struct {
	setup  throughput
	victim string
	// The tool's clock (the same host clock as the hub's).
	killAt, doneAt time.Time
	// lastRenew is the victim's last lease renewal (hub clock).
	lastRenew time.Time
	// unknownAt and noExecuteAt are the victim's cluster events.
	unknownAt, noExecuteAt time.Time
	// evictionsBeforeKill counts evictions the hub made during set-up.
	evictionsBeforeKill int64
	// Per binding, from events (or the fallback).
	bindings map[string]*bindingTimes
	// Event counts and the hub's counters over the failover.
	evictedEvents, endedEvents, duplicateEvicted int
	statsEvictions, statsEnded                   int64
	endReasons                                   map[string]int
	fromFallback                                 int
	eventsListed                                 int
	polls                                        int
	pollTime                                     time.Duration
	// Hub resources.
	cpuSeconds                  float64 // over kill → done
	cpuActivePercent, cpuPeak5s float64
	rssAtKill, rssMax, rssEnd   float64
	rssPeakLife                 float64
	storeWrites, storeConflicts int64
	worksSent, workDeletesSent  int64
	// writes are the hub's API writes from the kill until every task ended.
	writes writePhase
	// Final state of the bindings and the cross-checks.
	placements              map[string]int // "member-2:2,member-3:1" → bindings
	leftOnVictim, tasksLeft int
	checks                  []string
	checkFailures           int
	hubLog                  hubLogSummary
	waitErr                 error
}

type bindingTimes struct {
	evicted, ended       time.Time
	rescheduled          time.Time // first Scheduled event after the eviction
	scheduledEvents      []time.Time
	endReason            string
	evictedFromFallback  bool
	endedFromFallback    bool
	fallbackTaskCreated  time.Time // creationTimestamp of the task, second precision
	fallbackTaskGoneSeen time.Time // first poll (tool clock) without the task
}

// hubStats is the part of /debug/stats the failover uses.
type hubStats struct {
	StoreWrites     int64 `json:"storeWrites"`
	StoreConflicts  int64 `json:"storeConflicts"`
	WorksSent       int64 `json:"worksSent"`
	WorkDeletesSent int64 `json:"workDeletesSent"`
	Failover        struct {
		Evictions  int64             `json:"evictions"`
		TasksEnded int64             `json:"evictionTasksEnded"`
		ZoneModes  map[string]string `json:"zoneModes"`
	} `json:"failover"`
}

type cpuSample struct {
	at  time.Time
	cpu float64
}

// measureFailover kills the first cluster's agent and waits until every
// binding's eviction task ended, then reads the events.
func measureFailover(ctx context.Context, h *fleetProcs, env *membercluster.Environment, o options, names []string) (*failoverReport, error) {
	victim := names[0]
	rep := &failoverReport{victim: victim, bindings: map[string]*bindingTimes{}, endReasons: map[string]int{}, placements: map[string]int{}}
	pid := h.hub.Pid()
	if pid == 0 {
		return nil, fmt.Errorf("the hub is not running:\n%v", h.hub.ExitError())
	}
	// After its start the hub declares nothing Unknown for a grace period
	// plus the lease duration (the one the agents propose, not the one it
	// grants), so a kill before then would measure that protection.
	if restartGrace := h.started.Add(o.failover.grace + agent.DefaultLeaseDuration + time.Second); time.Now().Before(restartGrace) {
		logf("failover: waiting %v for the end of the hub's restart grace (started + grace + agents' lease %v)", time.Until(restartGrace).Round(time.Second), agent.DefaultLeaseDuration)
		if err := sleepCtx(ctx, time.Until(restartGrace)); err != nil {
			return nil, err
		}
	}
	var before hubStats
	if err := h.get("/debug/stats", &before); err != nil {
		return nil, fmt.Errorf("hub stats before the kill: %w", err)
	}
	rep.evictionsBeforeKill = before.Failover.Evictions
	if rep.evictionsBeforeKill > 0 {
		logf("WARNING: the hub evicted %d bindings during set-up (a cluster looked down under load?); the figures below count only what follows the kill", rep.evictionsBeforeKill)
	}
	cpu0, err := procstat.CPUSeconds(pid)
	if err != nil {
		return nil, fmt.Errorf("hub CPU: %w", err)
	}
	rep.rssAtKill, _, _ = procstat.Memory(pid)
	rep.rssMax = rep.rssAtKill
	h.snapshotWrites(ctx, &rep.writes, &rep.writes.before)

	logf("failover: killing the agent of %s (pid %d) with SIGKILL", victim, h.agents[0].Pid())
	rep.killAt = time.Now()
	samples := []cpuSample{{rep.killAt, cpu0}}
	if err := h.agents[0].Kill(); err != nil {
		return nil, fmt.Errorf("kill the agent of %s: %w", victim, err)
	}
	var lease struct {
		Spec struct {
			RenewTime *metav1.MicroTime `json:"renewTime"`
		} `json:"spec"`
	}
	if err := h.get("/apis/coordination.k8s.io/v1/namespaces/flotilla-cluster-lease/leases/"+victim, &lease); err != nil {
		logf("failover: cannot read the lease of %s: %v", victim, err)
	} else if lease.Spec.RenewTime != nil {
		rep.lastRenew = lease.Spec.RenewTime.Time
	}

	n := int64(o.bindings)
	fallback := map[string]*bindingTimes{}
	deadline := rep.killAt.Add(o.failover.timeout)
	lastProgress, lastPoll := rep.killAt, time.Time{}
	var cur hubStats
	for {
		if err := sleepCtx(ctx, time.Second); err != nil {
			rep.waitErr = err
			break
		}
		now := time.Now()
		if h.hub.HasExited() {
			rep.waitErr = fmt.Errorf("the hub exited during the failover:\n%v", h.hub.ExitError())
			break
		}
		if c, err := procstat.CPUSeconds(pid); err == nil {
			samples = append(samples, cpuSample{now, c})
		}
		if rss, _, err := procstat.Memory(pid); err == nil {
			rep.rssMax = max(rep.rssMax, rss)
		}
		if err := h.get("/debug/stats", &cur); err != nil {
			logf("failover: hub stats: %v", err) // keep waiting: the hub may be busy
			continue
		}
		evicted, ended := cur.Failover.Evictions-before.Failover.Evictions, cur.Failover.TasksEnded-before.Failover.TasksEnded
		if o.failover.poll > 0 && now.Sub(lastPoll) >= o.failover.poll {
			lastPoll = now
			if err := pollBindings(h, victim, fallback, now); err != nil {
				logf("failover: list bindings: %v", err)
			}
			rep.polls++
			rep.pollTime += time.Since(now)
		}
		done := evicted >= n && ended >= n
		if done || now.Sub(lastProgress) >= o.failover.progressEvery {
			lastProgress = now
			cpuNow := samples[len(samples)-1]
			logf("failover: %5.1fs after the kill: evicted %d/%d, tasks ended %d/%d (hub: %.0f%% of a core since the kill, RSS %.0f MiB, zones %v)",
				now.Sub(rep.killAt).Seconds(), evicted, n, ended, n, 100*(cpuNow.cpu-cpu0)/cpuNow.at.Sub(rep.killAt).Seconds(), rep.rssMax, cur.Failover.ZoneModes)
		}
		if done {
			break
		}
		if now.After(deadline) {
			rep.waitErr = fmt.Errorf("timed out after %v: evicted %d/%d, tasks ended %d/%d", o.failover.timeout, evicted, n, ended, n)
			break
		}
	}
	rep.doneAt = time.Now()
	h.snapshotWrites(ctx, &rep.writes, &rep.writes.after)
	if c, err := procstat.CPUSeconds(pid); err == nil {
		samples = append(samples, cpuSample{rep.doneAt, c})
		rep.cpuSeconds = c - cpu0
	}
	rep.rssEnd, rep.rssPeakLife, _ = procstat.Memory(pid)
	rep.rssMax = max(rep.rssMax, rep.rssEnd)
	rep.statsEvictions = cur.Failover.Evictions - before.Failover.Evictions
	rep.statsEnded = cur.Failover.TasksEnded - before.Failover.TasksEnded
	rep.storeWrites, rep.storeConflicts = cur.StoreWrites-before.StoreWrites, cur.StoreConflicts-before.StoreConflicts
	rep.worksSent, rep.workDeletesSent = cur.WorksSent-before.WorksSent, cur.WorkDeletesSent-before.WorkDeletesSent
	if ctx.Err() != nil {
		return rep, rep.waitErr
	}
	// The last events may still wait for the next store flush; the hub
	// lists them from memory, but give the recorder a moment anyway.
	_ = sleepCtx(ctx, 1500*time.Millisecond)

	if err := rep.readEvents(h, victim); err != nil {
		return rep, fmt.Errorf("read the hub's events: %w", err)
	}
	rep.applyFallback(fallback)
	rep.cpuActivePercent, rep.cpuPeak5s = cpuFigures(samples, rep.firstEvicted(), rep.lastEnded())
	if err := rep.finalState(ctx, h, env, o.failover.checks); err != nil {
		logf("failover: cross-check: %v", err)
		rep.checks = append(rep.checks, "cross-check failed: "+err.Error())
		rep.checkFailures++
	}
	rep.hubLog = summarizeHubLog(h.hub.LogPath, rep.killAt)
	return rep, rep.waitErr
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// bindingList is the part of a ResourceBindingList the failover reads.
type bindingList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Clusters              []targetCluster `json:"clusters"`
			GracefulEvictionTasks []struct {
				FromCluster       string       `json:"fromCluster"`
				CreationTimestamp *metav1.Time `json:"creationTimestamp"`
			} `json:"gracefulEvictionTasks"`
		} `json:"spec"`
	} `json:"items"`
}

type targetCluster struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

func (f *fleetProcs) listBindings() (*bindingList, error) {
	var list bindingList
	if err := f.get("/apis/flotilla.io/v1alpha1/namespaces/bench/resourcebindings", &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// pollBindings records, for the fallback, each binding's eviction task from
// victim (its creationTimestamp) and the first poll at which it was gone
// with victim no longer placed.
func pollBindings(h *fleetProcs, victim string, seen map[string]*bindingTimes, now time.Time) error {
	list, err := h.listBindings()
	if err != nil {
		return err
	}
	for _, b := range list.Items {
		t := seen[b.Metadata.Name]
		if t == nil {
			t = &bindingTimes{}
			seen[b.Metadata.Name] = t
		}
		hasTask := false
		for _, task := range b.Spec.GracefulEvictionTasks {
			if task.FromCluster == victim {
				hasTask = true
				if task.CreationTimestamp != nil && t.fallbackTaskCreated.IsZero() {
					t.fallbackTaskCreated = task.CreationTimestamp.Time
				}
			}
		}
		placed := slices.ContainsFunc(b.Spec.Clusters, func(c targetCluster) bool { return c.Name == victim })
		if !hasTask && !placed && t.fallbackTaskGoneSeen.IsZero() {
			t.fallbackTaskGoneSeen = now
		}
	}
	return nil
}

// readEvents takes each binding's Evicted and EvictionTaskEnded times from
// the hub's events, and the victim's Unknown and NoExecute times.
func (r *failoverReport) readEvents(h *fleetProcs, victim string) error {
	var list corev1.EventList
	if err := h.get("/api/v1/events?fieldSelector="+url.QueryEscape("involvedObject.kind=ResourceBinding,involvedObject.namespace=bench"), &list); err != nil {
		return err
	}
	r.eventsListed = len(list.Items)
	endReason := regexp.MustCompile(`\(([A-Za-z]+)\)`)
	for _, ev := range list.Items {
		at := eventTime(&ev)
		if at.Before(r.killAt) {
			continue
		}
		// Evictions and task ends name the victim; Scheduled events
		// ("placed on {member-2:2, member-3:1}") after the kill are the
		// new placement.
		if ev.Reason != "Scheduled" && !strings.Contains(ev.Message, " "+victim+" ") {
			continue
		}
		t := r.bindings[ev.InvolvedObject.Name]
		if t == nil {
			t = &bindingTimes{}
			r.bindings[ev.InvolvedObject.Name] = t
		}
		switch ev.Reason {
		case "Scheduled":
			t.scheduledEvents = append(t.scheduledEvents, at)
		case "Evicted":
			r.evictedEvents++
			if !t.evicted.IsZero() {
				r.duplicateEvicted++
				continue
			}
			t.evicted = at
		case "EvictionTaskEnded":
			r.endedEvents++
			if t.ended.IsZero() {
				t.ended = at
				if m := endReason.FindStringSubmatch(ev.Message); m != nil {
					t.endReason = m[1]
				} else {
					t.endReason = "?"
				}
				if strings.Contains(ev.Message, "called off") {
					t.endReason = "ClusterRecovered"
				}
				r.endReasons[t.endReason]++
			}
		}
	}
	for _, t := range r.bindings {
		for _, at := range t.scheduledEvents {
			if !t.evicted.IsZero() && !at.Before(t.evicted) && (t.rescheduled.IsZero() || at.Before(t.rescheduled)) {
				t.rescheduled = at
			}
		}
	}
	var cl corev1.EventList
	if err := h.get("/api/v1/events?fieldSelector="+url.QueryEscape("involvedObject.kind=Cluster,involvedObject.name="+victim), &cl); err != nil {
		return err
	}
	for _, ev := range cl.Items {
		at := eventTime(&ev)
		if at.Before(r.killAt) {
			continue
		}
		switch {
		case r.unknownAt.IsZero() && strings.Contains(ev.Message, "→ Unknown"):
			r.unknownAt = at
		case r.noExecuteAt.IsZero() && ev.Reason == "TaintAdded" && strings.HasSuffix(ev.Message, ":NoExecute"):
			r.noExecuteAt = at
		}
	}
	return nil
}

func eventTime(ev *corev1.Event) time.Time {
	if !ev.EventTime.IsZero() {
		return ev.EventTime.Time
	}
	return ev.LastTimestamp.Time
}

// applyFallback fills in bindings the events missed from the binding
// polls: eviction at the task's creationTimestamp (seconds), end at the
// first poll that saw the task gone.
func (r *failoverReport) applyFallback(polled map[string]*bindingTimes) {
	for name, p := range polled {
		t := r.bindings[name]
		if t == nil {
			t = &bindingTimes{}
		}
		used := false
		if t.evicted.IsZero() && !p.fallbackTaskCreated.IsZero() {
			t.evicted, t.evictedFromFallback, used = p.fallbackTaskCreated, true, true
		}
		if t.ended.IsZero() && !t.evicted.IsZero() && !p.fallbackTaskGoneSeen.IsZero() {
			t.ended, t.endedFromFallback, used = p.fallbackTaskGoneSeen, true, true
			t.endReason = "seen gone (fallback)"
			r.endReasons[t.endReason]++
		}
		if used {
			r.bindings[name] = t
			r.fromFallback++
		}
	}
}

func (r *failoverReport) evictedTimes() []time.Time {
	var out []time.Time
	for _, t := range r.bindings {
		if !t.evicted.IsZero() {
			out = append(out, t.evicted)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// evictionRate is the evictions a second from the first Evicted event to
// the last (0 with fewer than two).
func (r *failoverReport) evictionRate() float64 { return rateOf(r.evictedTimes()) }

// rateOf is the events a second from the first of sorted times to the
// last (0 with fewer than two).
func rateOf(evicted []time.Time) float64 {
	if len(evicted) < 2 {
		return 0
	}
	span := evicted[len(evicted)-1].Sub(evicted[0])
	if span <= 0 {
		return 0
	}
	return float64(len(evicted)-1) / span.Seconds()
}

// capacityRates are the failover's paces to set against the API server's
// limit: the eviction decisions (first to last Evicted event) and the
// whole failover (first eviction to last task end, with the hub's writes
// a second from the kill until then).
func (r *failoverReport) capacityRates() []rate {
	out := []rate{{what: "eviction decisions (first → last Evicted)", perSec: r.evictionRate()}}
	first, last := r.firstEvicted(), r.lastEnded()
	if first.IsZero() || !last.After(first) {
		return out
	}
	n := float64(len(r.evictedTimes()))
	wall := r.doneAt.Sub(r.killAt).Seconds()
	written := r.writes.perUnit(int(r.statsEvictions)) * float64(r.statsEvictions)
	return append(out, rate{what: "whole failover (first eviction → last task end)", perSec: n / last.Sub(first).Seconds(), writesS: written / wall})
}

func (r *failoverReport) firstEvicted() time.Time {
	if ts := r.evictedTimes(); len(ts) > 0 {
		return ts[0]
	}
	return time.Time{}
}

func (r *failoverReport) lastEnded() time.Time {
	var last time.Time
	for _, t := range r.bindings {
		if t.ended.After(last) {
			last = t.ended
		}
	}
	return last
}

// latencies are eviction decision → task end, per binding with both.
func (r *failoverReport) latencies() []time.Duration {
	return r.span(func(t *bindingTimes) (time.Time, time.Time) { return t.evicted, t.ended })
}

// span returns to − from over the bindings with both, sorted.
func (r *failoverReport) span(times func(*bindingTimes) (from, to time.Time)) []time.Duration {
	var out []time.Duration
	for _, t := range r.bindings {
		if from, to := times(t); !from.IsZero() && !to.IsZero() {
			out = append(out, to.Sub(from))
		}
	}
	slices.Sort(out)
	return out
}

// cpuFigures returns the hub's CPU (percent of a core) between from and to,
// interpolated from the samples, and its highest 5-second average.
func cpuFigures(samples []cpuSample, from, to time.Time) (active, peak5s float64) {
	at := func(t time.Time) float64 {
		for i := 1; i < len(samples); i++ {
			a, b := samples[i-1], samples[i]
			if !t.After(b.at) {
				if !t.After(a.at) {
					return a.cpu
				}
				f := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
				return a.cpu + f*(b.cpu-a.cpu)
			}
		}
		return samples[len(samples)-1].cpu
	}
	if len(samples) < 2 {
		return 0, 0
	}
	if !from.IsZero() && to.After(from) {
		active = 100 * (at(to) - at(from)) / to.Sub(from).Seconds()
	}
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			if d := samples[j].at.Sub(samples[i].at); d >= 5*time.Second {
				peak5s = max(peak5s, 100*(samples[j].cpu-samples[i].cpu)/d.Seconds())
				break
			}
		}
	}
	return active, peak5s
}

// workList is the part of a WorkList the cross-check reads.
type workList struct {
	Items []struct {
		Metadata struct {
			Namespace         string            `json:"namespace"`
			Annotations       map[string]string `json:"annotations"`
			DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
		} `json:"metadata"`
	} `json:"items"`
}

// finalState checks every binding's final placement and cross-checks a
// few directly in the member clusters: the cluster that took the extra
// replica runs them Available, the others run theirs, member-1 still has
// its copy (its agent is dead) and the hub holds its Work as a tombstone.
func (r *failoverReport) finalState(ctx context.Context, h *fleetProcs, env *membercluster.Environment, checks int) error {
	list, err := h.listBindings()
	if err != nil {
		return fmt.Errorf("list bindings: %w", err)
	}
	placement := map[string]map[string]int{}
	for _, b := range list.Items {
		p := map[string]int{}
		var parts []string
		for _, c := range b.Spec.Clusters {
			p[c.Name] = c.Replicas
			parts = append(parts, fmt.Sprintf("%s:%d", c.Name, c.Replicas))
			if c.Name == r.victim {
				r.leftOnVictim++
			}
		}
		r.tasksLeft += len(b.Spec.GracefulEvictionTasks)
		slices.Sort(parts)
		r.placements[strings.Join(parts, ",")]++
		placement[b.Metadata.Name] = p
	}
	var works workList
	if err := h.get("/apis/flotilla.io/v1alpha1/works", &works); err != nil {
		return fmt.Errorf("list works: %w", err)
	}
	tombstone := map[string]bool{} // binding name → victim's Work is a tombstone
	for _, w := range works.Items {
		if w.Metadata.Namespace == "flotilla-es-"+r.victim && w.Metadata.DeletionTimestamp != nil {
			tombstone[strings.TrimPrefix(w.Metadata.Annotations["flotilla.io/binding"], "bench/")] = true
		}
	}
	// The bindings to check: spread over the order in which tasks ended.
	var ended []string
	for name, t := range r.bindings {
		if !t.ended.IsZero() {
			ended = append(ended, name)
		}
	}
	slices.SortFunc(ended, func(a, b string) int { return r.bindings[a].ended.Compare(r.bindings[b].ended) })
	if len(ended) == 0 || checks <= 0 {
		return nil
	}
	// The first and the last task to end, and evenly between.
	picks := map[int]bool{len(ended) - 1: true}
	if k := min(checks, len(ended)); k > 1 {
		for i := range k {
			picks[i*(len(ended)-1)/(k-1)] = true
		}
	}
	clients := map[string]deploymentGetter{}
	for _, idx := range slices.Sorted(mapKeys(picks)) {
		bname := ended[idx]
		dname := strings.TrimSuffix(bname, "-deployment")
		t := r.bindings[bname]
		var got []string
		ok := true
		for _, c := range env.Clusters() {
			want, placed := placement[bname][c.Name]
			dg, err := clientFor(clients, c)
			if err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			spec, avail, found, err := dg(cctx, dname)
			cancel()
			switch {
			case err != nil:
				got = append(got, fmt.Sprintf("%s: %v", c.Name, err))
				ok = false
			case c.Name == r.victim:
				// Its agent is dead: the copy stays until it returns.
				state := "gone"
				if found {
					state = fmt.Sprintf("%d/%d available (agent down, left in place)", avail, spec)
				}
				if tombstone[bname] {
					state += ", hub Work a tombstone"
				} else {
					state += ", hub Work NOT a tombstone"
					ok = false
				}
				got = append(got, c.Name+" "+state)
			case !placed:
				got = append(got, fmt.Sprintf("%s not placed", c.Name))
			default:
				got = append(got, fmt.Sprintf("%s %d/%d available (placed %d)", c.Name, avail, spec, want))
				if !found || spec != want || avail != want {
					ok = false
				}
			}
		}
		verdict := "ok"
		if !ok {
			verdict = "MISMATCH"
			r.checkFailures++
		}
		r.checks = append(r.checks, fmt.Sprintf("%s (task ended %.1fs after the kill): %s — %s", dname, t.ended.Sub(r.killAt).Seconds(), strings.Join(got, "; "), verdict))
	}
	return nil
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// deploymentGetter returns a bench Deployment's spec.replicas and
// status.availableReplicas, and whether it exists.
type deploymentGetter func(ctx context.Context, name string) (spec, available int, found bool, err error)

func clientFor(cache map[string]deploymentGetter, c *membercluster.Cluster) (deploymentGetter, error) {
	if g, ok := cache[c.Name]; ok {
		return g, nil
	}
	cs, err := c.Clientset()
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", c.Name, err)
	}
	g := func(ctx context.Context, name string) (int, int, bool, error) {
		d, err := cs.AppsV1().Deployments("bench").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return 0, 0, false, nil
			}
			return 0, 0, false, fmt.Errorf("get deployment bench/%s: %w", name, err)
		}
		spec := 1
		if d.Spec.Replicas != nil {
			spec = int(*d.Spec.Replicas)
		}
		return spec, int(d.Status.AvailableReplicas), true, nil
	}
	cache[c.Name] = g
	return g, nil
}

// hubLogSummary counts the hub's warnings and errors logged since the kill.
type hubLogSummary struct {
	path           string
	warns, errors  int
	firstMessages  []string
	kinds          map[string]int // "WARN reconcile failed; retrying controller=status" → lines
	readErr        error
	linesAfterKill int
}

var (
	logTime       = regexp.MustCompile(`^time=(\S+) level=(\w+) msg=("(?:[^"\\]|\\.)*"|\S+)`)
	logController = regexp.MustCompile(` controller=(\S+)`)
)

func summarizeHubLog(path string, since time.Time) hubLogSummary {
	s := hubLogSummary{path: path, kinds: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		s.readErr = err
		return s
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := logTime.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || at.Before(since.Add(-time.Second)) {
			continue
		}
		s.linesAfterKill++
		if m[2] != "WARN" && m[2] != "ERROR" {
			continue
		}
		if m[2] == "WARN" {
			s.warns++
		} else {
			s.errors++
		}
		key := m[2] + " " + m[3]
		if c := logController.FindStringSubmatch(sc.Text()); c != nil {
			key += " controller=" + c[1]
		}
		s.kinds[key]++
		if seen[key] == 0 && len(s.firstMessages) < 8 {
			line := sc.Text()
			if len(line) > 300 {
				line = line[:300] + "…"
			}
			s.firstMessages = append(s.firstMessages, line)
		}
		seen[key]++
	}
	s.readErr = sc.Err()
	return s
}

func (r *failoverReport) print(o options, names []string) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	fmt.Printf("machine                     %d CPUs, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("member clusters             %d (3 KWOK nodes each), %d Deployments of %d replicas (1 per cluster, Divided by equal static weights, requests 10m/16Mi)\n",
		len(names), o.bindings, len(names))
	fmt.Printf("member components           %s\n", o.memberComponents())
	fmt.Printf("hub flags                   %s\n", strings.Join(append(o.failover.hubArgs(), o.hubExtraArgs...), " "))
	if o.hubNice != 0 {
		fmt.Printf("hub nice                    %d (the member clusters, agents and this tool at 0)\n", o.hubNice)
	}
	fmt.Printf("set-up                      all scheduled %v, all Works applied %v, all Available %v after the first apply request\n",
		r.setup.scheduled.Round(time.Millisecond), r.setup.applied.Round(time.Millisecond), r.setup.available.Round(time.Millisecond))
	fmt.Printf("failover                    agent of %s killed (SIGKILL) at %s\n", r.victim, r.killAt.Format("15:04:05.000"))
	if r.evictionsBeforeKill > 0 {
		fmt.Printf("  WARNING                   %d evictions before the kill (set-up)\n", r.evictionsBeforeKill)
	}
	if !r.lastRenew.IsZero() && !r.unknownAt.IsZero() {
		fmt.Printf("  kill → Unknown            %s (last renewal %s before the kill; Unknown %s after renewal + grace)\n",
			ms(r.unknownAt.Sub(r.killAt)), ms(r.killAt.Sub(r.lastRenew)), ms(r.unknownAt.Sub(r.lastRenew.Add(o.failover.grace))))
	}
	if !r.unknownAt.IsZero() && !r.noExecuteAt.IsZero() {
		fmt.Printf("  Unknown → NoExecute       %s (eviction timeout %v)\n", ms(r.noExecuteAt.Sub(r.unknownAt)), o.failover.evictionTimeout)
	}
	evicted := r.evictedTimes()
	if len(evicted) == 0 {
		fmt.Printf("  evictions                 none seen (hub counter: %d)\n", r.statsEvictions)
	} else {
		first, last := evicted[0], evicted[len(evicted)-1]
		sinceTaint := ""
		if !r.noExecuteAt.IsZero() {
			sinceTaint = "; NoExecute → first eviction " + ms(first.Sub(r.noExecuteAt))
		}
		fmt.Printf("  kill → first eviction     %s (expected ≤ grace + eviction timeout = %v%s)\n",
			ms(first.Sub(r.killAt)), o.failover.grace+o.failover.evictionTimeout, sinceTaint)
		rate := "n/a"
		if r := rateOf(evicted); r > 0 {
			rate = fmt.Sprintf("%.0f/s", r)
		}
		fmt.Printf("  evictions                 %d of %d bindings in %s (first → last Evicted event): %s\n", len(evicted), o.bindings, ms(last.Sub(first)), rate)
		if le := r.lastEnded(); !le.IsZero() {
			fmt.Printf("  first eviction → last task end  %s (kill → last task end %s)\n", ms(le.Sub(first)), ms(le.Sub(r.killAt)))
		}
	}
	if lat := r.latencies(); len(lat) > 0 {
		fmt.Printf("  eviction → replacement Available (task end)  p50 %s  p99 %s  max %s  (min %s, %d bindings)\n",
			pct(lat, 0.5), pct(lat, 0.99), ms(lat[len(lat)-1]), ms(lat[0]), len(lat))
	}
	if lat := r.span(func(t *bindingTimes) (time.Time, time.Time) { return t.evicted, t.rescheduled }); len(lat) > 0 {
		fmt.Printf("    of which eviction → rescheduled (Scheduled event)  p50 %s  p99 %s  max %s  (%d bindings)\n",
			pct(lat, 0.5), pct(lat, 0.99), ms(lat[len(lat)-1]), len(lat))
	}
	if last, n := r.lastRescheduled(); n > 0 && !r.noExecuteAt.IsZero() {
		fmt.Printf("    NoExecute → last binding rescheduled  %s (%d bindings rescheduled)\n", ms(last.Sub(r.noExecuteAt)), n)
	}
	if lat := r.span(func(t *bindingTimes) (time.Time, time.Time) { return t.rescheduled, t.ended }); len(lat) > 0 {
		fmt.Printf("    and rescheduled → task end (agents, member clusters, status)  p50 %s  p99 %s  max %s\n",
			pct(lat, 0.5), pct(lat, 0.99), ms(lat[len(lat)-1]))
	}
	reasons := slices.Sorted(mapKeys(r.endReasons))
	var rs []string
	for _, k := range reasons {
		rs = append(rs, fmt.Sprintf("%s %d", k, r.endReasons[k]))
	}
	fmt.Printf("  tasks ended by            %s\n", strings.Join(rs, ", "))
	fmt.Printf("  events                    %d Evicted, %d EvictionTaskEnded on bindings (hub counters: %d evictions, %d tasks ended; %d duplicate Evicted)\n",
		r.evictedEvents, r.endedEvents, r.statsEvictions, r.statsEnded, r.duplicateEvicted)
	if r.polls > 0 {
		fmt.Printf("  binding polls (fallback)  %d lists of the bindings during the failover, %s each on average\n", r.polls, ms(r.pollTime/time.Duration(r.polls)))
	}
	if r.fromFallback > 0 {
		fmt.Printf("  FALLBACK                  %d bindings timed from binding specs (task creationTimestamp: seconds; task end: %v polls)\n", r.fromFallback, o.failover.poll)
	}
	wall := r.doneAt.Sub(r.killAt)
	fmt.Printf("hub CPU                     %.0f%% of a core kill → all tasks ended (%.1f s CPU in %s), %.0f%% first eviction → last task end, peak 5 s %.0f%%\n",
		100*r.cpuSeconds/wall.Seconds(), r.cpuSeconds, ms(wall), r.cpuActivePercent, r.cpuPeak5s)
	fmt.Printf("hub RSS                     %.0f MiB at the kill, max %.0f MiB during the failover, %.0f MiB at the end (peak since start %.0f MiB)\n",
		r.rssAtKill, r.rssMax, r.rssEnd, r.rssPeakLife)
	fmt.Printf("hub work during failover    %d registry API writes (%d conflicts), %d Works sent, %d Work deletions sent\n", r.storeWrites, r.storeConflicts, r.worksSent, r.workDeletesSent)
	printWrites("the hub's API writes per binding in the set-up, first apply request → all Available", r.setup.writes.table(o.bindings, "binding"))
	printWrites(fmt.Sprintf("the hub's API writes per evicted binding (%d evictions), kill → every task ended", r.statsEvictions), r.writes.table(int(r.statsEvictions), "eviction"))
	var ps []string
	for _, k := range slices.Sorted(mapKeys(r.placements)) {
		ps = append(ps, fmt.Sprintf("{%s} %d", k, r.placements[k]))
	}
	fmt.Printf("final placements            %s; %d still on %s, %d eviction tasks left\n", strings.Join(ps, ", "), r.leftOnVictim, r.victim, r.tasksLeft)
	fmt.Printf("cross-check in the member clusters (%d mismatches):\n", r.checkFailures)
	for _, c := range r.checks {
		fmt.Printf("  %s\n", c)
	}
	l := r.hubLog
	switch {
	case l.readErr != nil:
		fmt.Printf("hub log                     %s: %v\n", l.path, l.readErr)
	default:
		fmt.Printf("hub log since the kill      %d lines, %d warnings, %d errors (%s)\n", l.linesAfterKill, l.warns, l.errors, l.path)
		for _, k := range slices.Sorted(mapKeys(l.kinds)) {
			fmt.Printf("  %5d × %s\n", l.kinds[k], k)
		}
		if len(l.firstMessages) > 0 {
			fmt.Println("  first of each kind:")
		}
		for _, m := range l.firstMessages {
			fmt.Printf("  %s\n", m)
		}
	}
}

// lastRescheduled is the latest first Scheduled event after an eviction,
// and how many bindings had one.
func (r *failoverReport) lastRescheduled() (last time.Time, n int) {
	for _, t := range r.bindings {
		if t.rescheduled.IsZero() {
			continue
		}
		n++
		if t.rescheduled.After(last) {
			last = t.rescheduled
		}
	}
	return last, n
}
