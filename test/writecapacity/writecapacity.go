// Package writecapacity measures how many writes a second an API server
// sustains for a given mix of writes — the rows of an apiwrites table,
// such as the hub's writes per eviction — made as fast as the server
// answers by many clients at once, on scratch objects of one namespace
// that the hub's controllers leave alone (an excluded namespace, bindings
// with no placement, Works outside every execution namespace). Its result
// divided by a phase's writes per binding is the most bindings a second
// that phase could reach on that server: the limit the tools compare
// their rates with.
package writecapacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/internal/apiwrites"
)

// Options tune a measurement; zero fields take the defaults.
type Options struct {
	// Namespace holds the scratch objects; it is created, then deleted
	// with them. Default flotilla-write-capacity (the hub's own prefix:
	// nothing in it is a template).
	Namespace string
	Duration  time.Duration // how long the writes go on; default DefaultDuration
	Workers   int           // clients writing at once; default DefaultWorkers
	// Pool is how many objects are made beforehand for each kind the mix
	// deletes; the measurement ends early if one runs out. Default 1,000.
	Pool int
	// Samples give the scratch objects their content (and so their size):
	// the status, the manifests, the template. Default: small ones.
	Samples Samples
	// Progress, if set, is told what is going on.
	Progress func(format string, args ...any)
}

// Defaults of Options.
const (
	DefaultDuration = 20 * time.Second
	DefaultWorkers  = 16
)

// Result is what a measurement made.
type Result struct {
	Made      apiwrites.Counts  // writes that succeeded, by kind
	Conflicts int               // writes answered 409 (retried after a GET)
	Failed    int               // writes that failed otherwise (not counted in Made)
	FirstErr  error             // the first of those failures
	Elapsed   time.Duration     // from the first write to the last answer
	Skipped   []apiwrites.Write // kinds of the mix it cannot make, left out
}

// PerSecond is the writes that succeeded per second.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return r.Made.Total() / r.Elapsed.Seconds()
}

// Measure makes the writes of mix, in its proportions, for opts.Duration
// and reports how many succeeded. cfg is used as it is, but with no client
// rate limit: the server alone sets the pace.
func Measure(ctx context.Context, cfg *rest.Config, mix apiwrites.Counts, opts Options) (Result, error) {
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("write capacity: kube client: %w", err)
	}
	flotilla, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return Result{}, fmt.Errorf("write capacity: flotilla client: %w", err)
	}
	s := &scratch{kube: kube, flotilla: flotilla, ns: opts.Namespace, samples: opts.Samples}
	plan, skipped := planOf(mix)
	if len(plan) == 0 {
		return Result{Skipped: skipped}, errors.New("write capacity: no write of the mix can be made")
	}
	if err := s.createNamespace(ctx); err != nil {
		return Result{}, err
	}
	defer s.deleteNamespace()
	opts.progress("write capacity: preparing scratch objects in namespace %s", opts.Namespace)
	workers, err := s.prepare(ctx, plan, opts.Workers, opts.Pool)
	if err != nil {
		return Result{}, err
	}
	opts.progress("write capacity: %d clients writing for %s", opts.Workers, opts.Duration)
	res := run(ctx, plan, workers, opts.Duration)
	res.Skipped = skipped
	if res.Made.Total() == 0 && res.FirstErr != nil {
		return res, fmt.Errorf("write capacity: no write succeeded: %w", res.FirstErr)
	}
	return res, nil
}

func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = "flotilla-write-capacity"
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Pool <= 0 {
		o.Pool = 1000
	}
	return o
}

func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(format, args...)
	}
}

// errPoolEmpty ends a measurement whose objects to delete ran out.
var errPoolEmpty = errors.New("no scratch object left to delete")

// run lets every worker take the plan's writes in turn until the time is
// up, a pool runs dry or ctx ends. A write in flight at the deadline is
// answered, not cut off, and counted.
func run(ctx context.Context, plan []apiwrites.Write, workers []*worker, d time.Duration) Result {
	var next atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	res := Result{Made: apiwrites.Counts{}}
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for _, w := range workers {
		wg.Go(func() {
			made, conflicts, failed := apiwrites.Counts{}, 0, 0
			var firstErr error
			for !stop.Load() && ctx.Err() == nil && time.Now().Before(deadline) {
				kind := plan[int(next.Add(1)-1)%len(plan)]
				retried, err := w.write(ctx, kind)
				conflicts += retried
				if errors.Is(err, errPoolEmpty) {
					stop.Store(true)
				}
				switch {
				case err == nil:
					made[kind]++
				case !errors.Is(err, errPoolEmpty):
					failed++
					if firstErr == nil {
						firstErr = fmt.Errorf("%v: %w", kind, err)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Failed += failed
			if res.FirstErr == nil {
				res.FirstErr = firstErr
			}
			for k, n := range made {
				res.Made[k] += n
			}
			res.Conflicts += conflicts
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// planOf spreads the kinds of mix it can make over one cycle of 1,000
// writes in their proportions, interleaved (smooth weighted round
// robin), and lists the kinds it cannot make.
func planOf(mix apiwrites.Counts) (plan []apiwrites.Write, skipped []apiwrites.Write) {
	var kinds []apiwrites.Write
	var total float64
	for k, n := range mix {
		switch {
		case n <= 0:
		case !supported(k):
			skipped = append(skipped, k)
		default:
			kinds = append(kinds, k)
			total += n
		}
	}
	slices.SortFunc(kinds, apiwrites.Compare)
	slices.SortFunc(skipped, apiwrites.Compare)
	if len(kinds) == 0 {
		return nil, skipped
	}
	current := make([]float64, len(kinds))
	for range max(1000, len(kinds)) {
		best := 0
		for i, k := range kinds {
			current[i] += mix[k]
			if current[i] > current[best] {
				best = i
			}
		}
		current[best] -= total
		plan = append(plan, kinds[best])
	}
	return plan, skipped
}

// retryConflict calls write; on a conflict it calls refresh (a GET) and
// tries once more, and reports how many conflicts it met.
func retryConflict(ctx context.Context, write func() error, refresh func(context.Context) error) (int, error) {
	err := write()
	if !apierrors.IsConflict(err) {
		return 0, err
	}
	if err := refresh(ctx); err != nil {
		return 1, err
	}
	err = write()
	if apierrors.IsConflict(err) {
		return 2, err
	}
	return 1, err
}

// probeAnnotation is the annotation each update changes.
const probeAnnotation = "flotilla.io/write-probe"

// probeCondition is the status condition each status write changes.
const probeCondition = "WriteProbe"

// probeStatus returns conds with the probe's condition saying n.
func probeStatus(conds []metav1.Condition, n int) []metav1.Condition {
	c := metav1.Condition{Type: probeCondition, Status: metav1.ConditionTrue, Reason: "Probe", Message: fmt.Sprint(n), LastTransitionTime: metav1.Now()}
	for i := range conds {
		if conds[i].Type == probeCondition {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

// eventFor is a new scratch Event about obj.
func eventFor(ns, name string, obj corev1.ObjectReference) *corev1.Event {
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, GenerateName: name + "."},
		InvolvedObject: obj, Reason: "WriteProbe", Type: corev1.EventTypeNormal,
		Message:        "a scratch event of the write-capacity measurement",
		Source:         corev1.EventSource{Component: "flotilla-write-capacity"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
}
