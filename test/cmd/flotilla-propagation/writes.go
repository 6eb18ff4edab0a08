package main

// API writes per binding and per eviction: the hub counts its own
// clients' writes that succeeded (flotilla_api_writes_total) and those
// that met a conflict (flotilla_api_write_conflicts_total), by resource,
// subresource and verb; the tool reads them from the hub's /metrics before
// and after a phase and divides the difference by the bindings the phase
// handled. Writes the hub makes whatever the phase (lease and Cluster
// status writes, events) are counted too, in rows of their own.

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-io/flotilla/internal/apiwrites"
)

// writeSnapshot is the hub's write counters at one moment.
type writeSnapshot struct {
	succeeded, conflicts apiwrites.Counts
}

// writeCounts reads the hub's write counters.
func (f *fleetProcs) writeCounts(ctx context.Context) (writeSnapshot, error) {
	families, err := f.api.Metrics(ctx)
	if err != nil {
		return writeSnapshot{}, fmt.Errorf("read the hub's API write counters: %w", err)
	}
	return snapshotFrom(families), nil
}

func snapshotFrom(families map[string]*dto.MetricFamily) writeSnapshot {
	return writeSnapshot{succeeded: countsFrom(families["flotilla_api_writes_total"]), conflicts: countsFrom(families["flotilla_api_write_conflicts_total"])}
}

// countsFrom reads a counter family labelled resource, subresource, verb.
func countsFrom(family *dto.MetricFamily) apiwrites.Counts {
	out := apiwrites.Counts{}
	for _, m := range family.GetMetric() {
		var w apiwrites.Write
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "resource":
				w.Resource = l.GetValue()
			case "subresource":
				w.Subresource = l.GetValue()
			case "verb":
				w.Verb = l.GetValue()
			}
		}
		out[w] += m.GetCounter().GetValue()
	}
	return out
}

// writePhase is the write counters around one phase of the run.
type writePhase struct {
	before, after writeSnapshot
	err           error // a snapshot could not be read: no table
}

// table is the phase's writes divided by n, the bindings it handled, as a
// Markdown table (per names the unit: "binding", "eviction").
func (p writePhase) table(n int, per string) string {
	if p.err != nil {
		return p.err.Error() + "\n"
	}
	return apiwrites.Table(p.after.succeeded.Minus(p.before.succeeded), p.after.conflicts.Minus(p.before.conflicts), float64(n), per)
}

// perUnit is the phase's writes divided by n, the bindings it handled (0
// without counts).
func (p writePhase) perUnit(n int) float64 {
	if p.err != nil || n <= 0 {
		return 0
	}
	return p.after.succeeded.Minus(p.before.succeeded).Total() / float64(n)
}

// snapshotWrites reads the counters into *into, or records why not (the
// run goes on: the write table is one figure among many).
func (f *fleetProcs) snapshotWrites(ctx context.Context, p *writePhase, into *writeSnapshot) {
	s, err := f.writeCounts(ctx)
	if err != nil {
		logf("%v", err)
		if p.err == nil {
			p.err = err
		}
		return
	}
	*into = s
}

// printWrites prints a write table under its title.
func printWrites(title, table string) {
	fmt.Printf("%s:\n%s", title, table)
}
