package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	hubstats "github.com/flotilla-io/flotilla/hub/stats"
	"github.com/flotilla-io/flotilla/test/procstat"
)

// steadyState are the rates over the measurement window.
type steadyState struct {
	window                    time.Duration
	heartbeatsPerSec          float64
	statusPerSec              float64
	storeWritesPerSec         float64
	storeConflictsPerSec      float64
	cpuPercent                float64 // of one core
	rssMiB, peakRSSMiB        float64
	connected, clusters       int
	transitionsDuringMeasure  int64
	rejectedDuringMeasurement int64
	goMemory                  goMemory
}

// goMemory is where the hub's memory goes, from its Go metrics at the end
// of the window.
type goMemory struct {
	heapInUse, nextGC, stacks, goroutines float64
}

func readGoMemory(ctx context.Context, h *hubProc) (goMemory, error) {
	families, err := h.api.Metrics(ctx)
	if err != nil {
		return goMemory{}, err
	}
	value := func(name string) float64 {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0
		}
		m := f.GetMetric()[0]
		return m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return goMemory{heapInUse: value("go_memstats_heap_inuse_bytes"), nextGC: value("go_memstats_next_gc_bytes"),
		stacks: value("go_memstats_stack_inuse_bytes"), goroutines: value("go_goroutines")}, nil
}

func (m goMemory) print(w io.Writer, agents int) {
	const mib, kib = 1 << 20, 1 << 10
	perAgent := float64(max(agents, 1))
	fmt.Fprintf(w, "hub Go memory           heap in use %.0f MiB (next GC at %.0f MiB), stacks %.0f MiB, %.0f goroutines; per agent %.1f KiB heap, %.1f KiB stacks, %.1f goroutines\n",
		m.heapInUse/mib, m.nextGC/mib, m.stacks/mib, m.goroutines, m.heapInUse/kib/perAgent, m.stacks/kib/perAgent, m.goroutines/perAgent)
}

func measureSteadyState(ctx context.Context, h *hubProc, window time.Duration) (steadyState, error) {
	var before, after hubstats.Stats
	if err := h.get("/debug/stats", &before); err != nil {
		return steadyState{}, err
	}
	cpuBefore, err := procstat.CPUSeconds(h.proc.Pid())
	if err != nil {
		return steadyState{}, err
	}
	start := time.Now()
	logf("measuring steady state for %v", window)
	if err := sleepCtx(ctx, window); err != nil {
		return steadyState{}, err
	}
	if err := h.get("/debug/stats", &after); err != nil {
		return steadyState{}, err
	}
	cpuAfter, err := procstat.CPUSeconds(h.proc.Pid())
	if err != nil {
		return steadyState{}, err
	}
	elapsed := time.Since(start).Seconds()
	rss, peak, err := procstat.Memory(h.proc.Pid())
	if err != nil {
		return steadyState{}, err
	}
	mem, err := readGoMemory(ctx, h)
	if err != nil {
		return steadyState{}, fmt.Errorf("read the hub's Go memory: %w", err)
	}
	rate := func(a, b int64) float64 { return float64(b-a) / elapsed }
	return steadyState{
		window:                   time.Since(start),
		heartbeatsPerSec:         rate(before.Renewals, after.Renewals),
		statusPerSec:             rate(before.StatusReports, after.StatusReports),
		storeWritesPerSec:        rate(before.StoreWrites, after.StoreWrites),
		storeConflictsPerSec:     rate(before.StoreConflicts, after.StoreConflicts),
		cpuPercent:               100 * (cpuAfter - cpuBefore) / elapsed,
		rssMiB:                   rss,
		peakRSSMiB:               peak,
		connected:                after.ConnectedAgents,
		clusters:                 after.Clusters,
		transitionsDuringMeasure: after.Transitions - before.Transitions,
		goMemory:                 mem,
	}, nil
}

// detection is how exactly the hub noticed agents that stopped at once.
type detection struct {
	// stopped agents; detected and falseUnknown count clusters.
	stopped, detected, falseUnknown int
	// errors are Unknown time − (last acknowledged renewal + grace). A
	// renewal the hub stamped but whose acknowledgement was lost is not
	// known here, so an error can be one renewal interval too large.
	errors []time.Duration
	// hubErrors are the same from the hub's own last stamp, which the
	// event's message gives to the millisecond ("not renewed for D").
	hubErrors []time.Duration
	// stored is how long after the decision each event was stored (the
	// API's creationTimestamp: whole seconds).
	stored []time.Duration
	// waited is how long after the stop the last event was read.
	waited time.Duration
	// earlier are LeaseExpired events decided before the stop (left out).
	earlier int
}

// detectionWait bounds how long the tool waits for the Unknown events of
// the stopped agents: they are decided on time but written through the
// API server, which a loaded hub answers late.
const detectionWait = 3 * time.Minute

// measureDetection stops a fraction of the agents at once and measures how
// exactly the hub noticed: from each stopped agent's LeaseExpired event,
// and from the events of agents that were not stopped (false Unknown).
func measureDetection(ctx context.Context, h *hubProc, f *fleet, o options) (detection, error) {
	count := max(1, int(float64(len(f.agents))*o.stopFraction))
	victims := f.agents[:count]
	logf("stopping %d agents at once", count)
	stopAt := time.Now()
	stopAgents(victims)
	if err := sleepCtx(ctx, o.grace+3*time.Second); err != nil {
		return detection{}, err
	}
	stopped := map[string]*simAgent{}
	for _, a := range victims {
		stopped[a.name] = a
	}
	expiries, earlier, err := awaitExpiries(ctx, h, stopped, stopAt, stopAt.Add(o.grace+detectionWait))
	if err != nil {
		return detection{}, err
	}
	d := detection{stopped: count, earlier: earlier, waited: time.Since(stopAt)}
	detected, falseUnknown := map[string]bool{}, map[string]bool{}
	for _, ex := range expiries {
		victim := stopped[ex.cluster]
		if victim == nil {
			falseUnknown[ex.cluster] = true
			continue
		}
		detected[ex.cluster] = true
		renewed := time.Unix(0, victim.lastRenewal.Load())
		d.errors = append(d.errors, ex.at.Sub(renewed.Add(o.grace)))
		if silent, ok := notRenewedFor(ex.message); ok {
			d.hubErrors = append(d.hubErrors, silent-o.grace)
		}
		if !ex.created.IsZero() {
			d.stored = append(d.stored, ex.created.Sub(ex.at.Truncate(time.Second)))
		}
	}
	d.detected, d.falseUnknown = len(detected), len(falseUnknown)
	for _, ds := range [][]time.Duration{d.errors, d.hubErrors, d.stored} {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	}
	return d, nil
}

// awaitExpiries reads the LeaseExpired events decided after stopAt until
// every stopped agent has one or deadline passes, and counts the events
// decided before stopAt (a cluster that went Unknown while the fleet
// connected says nothing of this detection). A failed read of a loaded
// API server is tried again until the deadline.
func awaitExpiries(ctx context.Context, h *hubProc, stopped map[string]*simAgent, stopAt, deadline time.Time) ([]expiry, int, error) {
	for {
		all, err := leaseExpiries(h)
		var expiries []expiry
		earlier := 0
		seen := map[string]bool{}
		for _, ex := range all {
			if ex.at.Before(stopAt) {
				earlier++
				continue
			}
			expiries = append(expiries, ex)
			if stopped[ex.cluster] != nil {
				seen[ex.cluster] = true
			}
		}
		left := time.Until(deadline)
		switch {
		case err == nil && (len(seen) == len(stopped) || left <= 0):
			return expiries, earlier, nil
		case err != nil && left <= 0:
			return nil, 0, fmt.Errorf("read the LeaseExpired events after the stop: %w", err)
		case err != nil:
			logf("  reading the Unknown events failed (%v); trying again", err)
		default:
			logf("  %d of %d Unknown events in the API %v after the stop", len(seen), len(stopped), time.Since(stopAt).Round(time.Second))
		}
		if err := sleepCtx(ctx, max(time.Second, min(5*time.Second, left))); err != nil {
			return nil, 0, err
		}
	}
}

// notRenewedFor reads the silence the hub judged by from a LeaseExpired
// message: "Ready True → Unknown: cluster lease not renewed for 40.012s
// (grace period 40s)".
func notRenewedFor(message string) (time.Duration, bool) {
	const prefix = "not renewed for "
	i := strings.Index(message, prefix)
	if i < 0 {
		return 0, false
	}
	rest := message[i+len(prefix):]
	if j := strings.IndexByte(rest, ' '); j >= 0 {
		rest = rest[:j]
	}
	d, err := time.ParseDuration(rest)
	return d, err == nil
}

// expiry is one LeaseExpired event of a cluster. Each Unknown is an event
// of its own: the hub's message carries the silence to the millisecond,
// and its action a hash of the message, so only identical messages make a
// series.
type expiry struct {
	cluster string
	at      time.Time // decided (the event's microsecond time)
	created time.Time // stored (whole seconds)
	message string
}

// leaseExpiries reads the hub's LeaseExpired events. The last occurrence
// of a series is its (microsecond) lastObservedTime.
func leaseExpiries(h *hubProc) ([]expiry, error) {
	var events corev1.EventList
	if err := h.get("/api/v1/events?fieldSelector=involvedObject.kind%3DCluster,reason%3D"+v1alpha1.ReasonLeaseExpired, &events); err != nil {
		return nil, err
	}
	var out []expiry
	for _, ev := range events.Items {
		if ev.Reason != v1alpha1.ReasonLeaseExpired {
			continue
		}
		at, created := ev.EventTime.Time, ev.CreationTimestamp.Time
		if ev.Series != nil && ev.Series.LastObservedTime.After(at) {
			// The object was created for the first occurrence.
			at, created = ev.Series.LastObservedTime.Time, time.Time{}
		}
		out = append(out, expiry{cluster: ev.InvolvedObject.Name, at: at, created: created, message: ev.Message})
	}
	return out, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

func printReport(w io.Writer, o options, s steadyState, d *detection, agentErrors int64) {
	fmt.Fprintf(w, "machine                 %s\n", machine())
	fmt.Fprintf(w, "agents                  %d (connected %d, clusters %d), lease %v, grace %v, status changes every %v (0: never)\n",
		o.agents, s.connected, s.clusters, o.leaseDuration, o.grace, o.statusChange)
	fmt.Fprintf(w, "hub CPU                 %.1f %% of one core (over %v)\n", s.cpuPercent, s.window.Round(time.Second))
	fmt.Fprintf(w, "hub RSS                 %.0f MiB (peak %.0f MiB)\n", s.rssMiB, s.peakRSSMiB)
	s.goMemory.print(w, s.connected)
	fmt.Fprintf(w, "heartbeats/s            %.0f\n", s.heartbeatsPerSec)
	fmt.Fprintf(w, "status reports/s        %.0f\n", s.statusPerSec)
	fmt.Fprintf(w, "API writes/s            %.1f objects (%.1f/s re-read after a conflict)\n", s.storeWritesPerSec, s.storeConflictsPerSec)
	fmt.Fprintf(w, "Ready changes (steady)  %d\n", s.transitionsDuringMeasure)
	if d != nil {
		d.print(w)
	}
	fmt.Fprintf(w, "agent-side errors       %d\n", agentErrors)
}

func (d *detection) print(w io.Writer) {
	fmt.Fprintf(w, "stopped at once         %d, detected %d (events read %v after the stop), false Unknown among the rest %d; %d LeaseExpired events from before the stop left out\n",
		d.stopped, d.detected, d.waited.Round(time.Second), d.falseUnknown, d.earlier)
	quantiles := func(label string, ds []time.Duration, unit time.Duration, what string) {
		if len(ds) > 0 {
			fmt.Fprintf(w, "%-23s p50 %v  p99 %v  max %v  (%s; %d events)\n", label,
				percentile(ds, 0.50).Round(unit), percentile(ds, 0.99).Round(unit), ds[len(ds)-1].Round(unit), what, len(ds))
		}
	}
	quantiles("detection error", d.errors, time.Microsecond, "Unknown time − last acknowledged renewal − grace")
	quantiles("  by the hub's stamp", d.hubErrors, time.Millisecond, "the event's \"not renewed for\" − grace: counts renewals whose ack was lost")
	quantiles("Unknown event stored", d.stored, time.Second, "creationTimestamp − decision, whole seconds")
}
