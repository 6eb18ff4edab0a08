package main

// The API server's write capacity for a phase's own mix of writes, on the
// same hub right after the phase: the most bindings (or evictions) a
// second its writes would allow, to compare the phase's rate with.

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/writecapacity"
)

// capacity is one write-capacity measurement.
type capacity struct {
	result    writecapacity.Result
	hubWrites float64 // the hub's own writes during the measurement
	err       error
}

// measureCapacity replays phase's writes (in their proportions) on the
// hub's API server for d, as fast as it answers, on scratch objects shaped
// like the bench namespace's and sampleCluster's.
func (f *fleetProcs) measureCapacity(ctx context.Context, phase writePhase, d time.Duration, sampleCluster string) capacity {
	if phase.err != nil {
		return capacity{err: phase.err}
	}
	samples, err := f.capacitySamples(ctx, "bench", v1alpha1.ExecutionNamespace(sampleCluster))
	if err != nil {
		return capacity{err: err}
	}
	var around writePhase
	f.snapshotWrites(ctx, &around, &around.before)
	mix := phase.after.succeeded.Minus(phase.before.succeeded)
	res, err := writecapacity.Measure(ctx, f.api.Config(), mix, writecapacity.Options{Duration: d, Samples: samples, Progress: logf})
	f.snapshotWrites(ctx, &around, &around.after)
	c := capacity{result: res, err: err}
	if around.err == nil {
		c.hubWrites = around.after.succeeded.Minus(around.before.succeeded).Total()
	}
	return c
}

// capacitySamples are one binding and Deployment of namespace ns and one
// Work of workNamespace, for the scratch objects to weigh as much.
func (f *fleetProcs) capacitySamples(ctx context.Context, ns, workNamespace string) (writecapacity.Samples, error) {
	cfg := f.api.Config()
	flotilla, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return writecapacity.Samples{}, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return writecapacity.Samples{}, err
	}
	// A sample that cannot be read leaves the scratch objects of that
	// kind small: the figure is printed all the same.
	var s writecapacity.Samples
	one := metav1.ListOptions{Limit: 1}
	if l, err := flotilla.FlotillaV1alpha1().ResourceBindings(ns).List(ctx, one); err == nil && len(l.Items) > 0 {
		s.Binding = &l.Items[0]
	}
	if l, err := flotilla.FlotillaV1alpha1().Works(workNamespace).List(ctx, one); err == nil && len(l.Items) > 0 {
		s.Work = &l.Items[0]
	}
	if l, err := kube.AppsV1().Deployments(ns).List(ctx, one); err == nil && len(l.Items) > 0 {
		s.Deployment = &l.Items[0]
	}
	return s, nil
}

// rate is a phase's pace, to set against the limit.
type rate struct {
	what    string  // what was timed, e.g. "first eviction → last task end"
	perSec  float64 // units a second
	writesS float64 // the phase's API writes a second over the same span (0: not known)
}

// print prints the capacity and the limit it sets for a phase that made
// perUnit writes per unit ("binding", "eviction"), and each rate of the
// phase as a share of the limit.
func (c capacity) print(perUnit float64, unit string, rates ...rate) {
	if c.err != nil {
		fmt.Printf("API write capacity          not measured: %v\n", c.err)
		return
	}
	r := c.result
	fmt.Printf("API write capacity          %.0f writes/s of this mix (%d writes in %s, %d clients, QPS unlimited, %d conflicts; the hub wrote %.0f meanwhile)\n",
		r.PerSecond(), int(r.Made.Total()), r.Elapsed.Round(time.Millisecond), writecapacity.DefaultWorkers, r.Conflicts, c.hubWrites)
	if r.Failed > 0 {
		fmt.Printf("  failed writes             %d, left out (first: %v)\n", r.Failed, r.FirstErr)
	}
	if len(r.Skipped) > 0 {
		fmt.Printf("  not replayed              %v (kinds the measurement cannot make; their share is left out)\n", r.Skipped)
	}
	if perUnit <= 0 || r.PerSecond() <= 0 {
		return
	}
	limit := r.PerSecond() / perUnit
	fmt.Printf("  limit                     %.1f %ss/s (%.0f writes/s ÷ %.2f writes per %s)\n", limit, unit, r.PerSecond(), perUnit, unit)
	for _, x := range rates {
		if x.perSec <= 0 {
			continue
		}
		load := ""
		if x.writesS > 0 {
			load = fmt.Sprintf("; the hub wrote %.0f/s then, %.0f %% of the capacity", x.writesS, 100*x.writesS/r.PerSecond())
		}
		fmt.Printf("  measured, %s  %.1f %ss/s: %.0f %% of the limit%s\n", x.what, x.perSec, unit, 100*x.perSec/limit, load)
	}
}
