package main

import (
	"context"
	"fmt"
	"io"
	"sort"
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
	stopped, detected, falseUnknown int
	errors                          []time.Duration // Unknown time − (last renewal + grace)
}

func measureDetection(ctx context.Context, h *hubProc, f *fleet, o options) (detection, error) {
	count := max(1, int(float64(len(f.agents))*o.stopFraction))
	victims := f.agents[:count]
	logf("stopping %d agents at once", count)
	stopAgents(victims)
	if err := sleepCtx(ctx, o.grace+3*time.Second); err != nil {
		return detection{}, err
	}
	expiries, err := leaseExpiries(h)
	if err != nil {
		return detection{}, err
	}
	renewed := map[string]time.Time{}
	for _, a := range victims {
		renewed[a.name] = time.Unix(0, a.lastRenewal.Load())
	}
	stopped := map[string]bool{}
	for _, a := range victims {
		stopped[a.name] = true
	}
	d := detection{stopped: count}
	for _, ex := range expiries {
		if !stopped[ex.cluster] {
			d.falseUnknown++
			continue
		}
		d.detected++
		d.errors = append(d.errors, ex.at.Sub(renewed[ex.cluster].Add(o.grace)))
	}
	sort.Slice(d.errors, func(i, j int) bool { return d.errors[i] < d.errors[j] })
	return d, nil
}

// expiry is a cluster's last LeaseExpired event.
type expiry struct {
	cluster string
	at      time.Time
}

// leaseExpiries reads the hub's LeaseExpired events. A repeated event is
// one object: its last occurrence is the series' (microsecond)
// lastObservedTime.
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
		at := ev.EventTime.Time
		if ev.Series != nil && ev.Series.LastObservedTime.After(at) {
			at = ev.Series.LastObservedTime.Time
		}
		out = append(out, expiry{cluster: ev.InvolvedObject.Name, at: at})
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
	fmt.Fprintf(w, "stopped at once         %d, detected %d, false Unknown among the rest %d\n", d.stopped, d.detected, d.falseUnknown)
	if len(d.errors) > 0 {
		fmt.Fprintf(w, "detection error         p50 %v  p99 %v  max %v  (Unknown time − last renewal − grace)\n",
			percentile(d.errors, 0.50).Round(time.Microsecond), percentile(d.errors, 0.99).Round(time.Microsecond), d.errors[len(d.errors)-1].Round(time.Microsecond))
	}
}
