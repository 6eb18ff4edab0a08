package work

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/agent/memberpolicy"
	"github.com/flotilla-io/flotilla/agent/ownerref"
	"github.com/flotilla-io/flotilla/protocol"
)

// Defaults for Config fields left zero.
const (
	DefaultRetryInitial     = time.Second
	DefaultRetryMax         = time.Minute
	DefaultStatusInterval   = 500 * time.Millisecond
	DefaultProgressInterval = 5 * time.Second
	DefaultWorkers          = 4
)

// Config configures an Engine.
type Config struct {
	// Kube reads and writes records and namespaces and discovers the
	// cluster's resources.
	Kube kubernetes.Interface
	// Dynamic applies, watches and deletes the Works' objects.
	Dynamic dynamic.Interface
	// SystemNamespace holds the Work records (default flotilla-system). It
	// is created if missing.
	SystemNamespace string
	// Owner owns the records (nil: none): a record is written owned by
	// it, and one without it gets it when the records are loaded.
	Owner *ownerref.Owner
	// RetryInitial is the wait before retrying a failed apply or checking
	// again on a deletion that has not finished; it doubles up to RetryMax
	// (defaults 1s and 1m).
	RetryInitial, RetryMax time.Duration
	// StatusInterval is the shortest time between two WorkStatus messages
	// of one Work (default 500ms): bursts of changes are coalesced.
	StatusInterval time.Duration
	// ProgressInterval is the shortest time between two WorkStatus
	// messages of one Work that differ in key status and health messages
	// alone (default 5s): a rollout's replica counts, while each object's
	// health stays the same. A change of health is sent after StatusInterval.
	ProgressInterval time.Duration
	// Workers is how many Works are applied or deleted at once (default 4).
	Workers int
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Clock times fencing; nil means the real clock.
	Clock clock.Clock
	// Policy is the member cluster's bound on what Works may write: a
	// manifest it refuses is not applied and fails with the reason
	// RefusedByMemberPolicy, objects outside it are neither pruned nor
	// deleted, and the namespaces the engine creates get its Pod Security
	// label. Nil: no bound but RBAC's (the agent always sets one). With a
	// fixed list of allowed namespaces the engine watches its objects in
	// each of them rather than across the cluster.
	Policy *memberpolicy.Policy
	// ObserveApply, if set, is told how long each apply attempt that ran
	// to its end took and whether it applied the generation (for metrics).
	ObserveApply func(took time.Duration, applied bool)
}

func (cfg Config) withDefaults() Config {
	if cfg.SystemNamespace == "" {
		cfg.SystemNamespace = DefaultSystemNamespace
	}
	if cfg.RetryInitial == 0 {
		cfg.RetryInitial = DefaultRetryInitial
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.StatusInterval == 0 {
		cfg.StatusInterval = DefaultStatusInterval
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return cfg
}

func (cfg Config) validate() error {
	var errs []error
	if cfg.Kube == nil || cfg.Dynamic == nil {
		errs = append(errs, errors.New("a Kubernetes client and a dynamic client are required"))
	}
	if msgs := validation.IsDNS1123Label(cfg.SystemNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("system namespace %q is not a DNS-1123 label: %v", cfg.SystemNamespace, msgs))
	}
	if cfg.RetryInitial < 0 || cfg.RetryMax < cfg.RetryInitial {
		errs = append(errs, fmt.Errorf("retry backoff %v to %v: want 0 < initial <= max", cfg.RetryInitial, cfg.RetryMax))
	}
	if cfg.StatusInterval < 0 || cfg.ProgressInterval < 0 || cfg.Workers < 0 {
		errs = append(errs, errors.New("status interval, progress interval and workers must not be negative"))
	}
	return errors.Join(errs...)
}

// Engine applies Works to one member cluster, retries what failed, deletes
// what the hub no longer wants and reports health. Its methods are safe for
// concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	records recordStore
	feeds   feeds
	loaded  chan struct{}
	started atomic.Bool
	clock   clock.Clock
	// fenceWake wakes the fencing loop.
	fenceWake chan struct{}

	mu    sync.Mutex
	works map[string]*workState
	// Set by Run once the records are loaded.
	ctx     context.Context
	queue   workqueue.TypedRateLimitingInterface[string]
	statusQ workqueue.TypedDelayingInterface[string]
	watch   *watcher
	// contact is the last time the hub answered; contactFloor the least
	// time without an answer that counts as cut off (see Contact).
	contact      time.Time
	contactFloor time.Duration
	// fenced is closed, and replaced, when a Work is fenced.
	fenced chan struct{}
}

// NewEngine checks cfg and returns an engine; call Run to start it.
func NewEngine(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("work engine: %w", err)
	}
	return &Engine{
		cfg:     cfg,
		log:     cfg.Logger,
		kube:    cfg.Kube,
		dyn:     cfg.Dynamic,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Kube.Discovery())),
		records: recordStore{client: cfg.Kube, namespace: cfg.SystemNamespace, owner: cfg.Owner},
		loaded:  make(chan struct{}),
		works:   map[string]*workState{},
		clock:   cfg.Clock,

		fenceWake: make(chan struct{}, 1),
		fenced:    make(chan struct{}),
	}, nil
}

// Loaded is closed once Run has read the records, and Inventory is
// complete. Until then, the member cluster may be unreachable.
func (e *Engine) Loaded() <-chan struct{} { return e.loaded }

// Subscribe returns a feed of the engine's messages for the hub, until it is
// closed.
func (e *Engine) Subscribe() *Feed { return e.feeds.subscribe() }

// Inventory lists the Works applied successfully at least once and not
// deleted yet, by name, with the generation last applied successfully and
// whether they are fenced.
func (e *Engine) Inventory() []protocol.WorkRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	var refs []protocol.WorkRef
	for name, st := range e.works {
		if st.record != nil && st.record.Generation > 0 {
			refs = append(refs, protocol.WorkRef{Name: name, Generation: st.record.Generation, Fenced: st.record.fenced()})
		}
	}
	slices.SortFunc(refs, func(a, b protocol.WorkRef) int { return strings.Compare(a.Name, b.Name) })
	return refs
}

// Run loads the records, then applies and deletes Works and watches their
// objects until ctx ends. It returns nil once every goroutine it started
// has stopped. Call it once.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("work engine: Run called twice")
	}
	records, err := e.loadRecords(ctx)
	if err != nil {
		return nil // ctx ended
	}
	e.start(ctx, records)
	close(e.loaded)

	var wg sync.WaitGroup
	for range e.cfg.Workers {
		wg.Go(func() {
			for e.processNext() {
			}
		})
	}
	wg.Go(func() {
		for e.processStatus() {
		}
	})
	wg.Go(func() { e.fenceLoop(ctx) })
	<-ctx.Done()
	e.queue.ShutDown()
	e.statusQ.ShutDown()
	wg.Wait()
	e.watch.wait()
	return nil
}

// loadRecords reads the records, retrying with backoff while the member
// cluster cannot be reached, until ctx ends.
func (e *Engine) loadRecords(ctx context.Context) (map[string]*record, error) {
	delay := e.cfg.RetryInitial
	for {
		records, bad, err := e.records.load(ctx)
		if err == nil {
			for name, err := range bad {
				e.log.Error("ignoring a Work record that cannot be read: the agent will not prune or delete its objects",
					"namespace", e.cfg.SystemNamespace, "configMap", name, "err", err)
			}
			e.log.Info("Work records loaded", "works", len(records))
			return records, nil
		}
		e.log.Warn("cannot read the Work records, retrying", "err", err, "retryIn", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, e.cfg.RetryMax)
	}
}

// start makes the queues and the watcher, adopts the records and queues
// what Upsert and Delete asked for before.
func (e *Engine) start(ctx context.Context, records map[string]*record) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ctx = ctx
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](e.cfg.RetryInitial, e.cfg.RetryMax)
	e.queue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{})
	e.statusQ = workqueue.NewTypedDelayingQueue[string]()
	_, perNamespace := e.cfg.Policy.FixedNamespaces()
	e.watch = newWatcher(ctx, e.dyn, perNamespace, e.objectChanged, e.resourceSynced)
	// Until the hub answers, the agent counts itself cut off from its start.
	if e.contact.IsZero() {
		e.contact = e.clock.Now()
	}
	for name, r := range records {
		st := e.state(name)
		st.record = r
		if st.current == nil {
			st.current = recordedSet(r)
		}
		for _, ref := range r.all() {
			e.watch.ensure(ref)
		}
		if r.fenced() && st.desired == nil && !st.deleting {
			// Fenced before a restart: fenced again, in case something
			// scaled the workloads up meanwhile, until the hub says.
			st.fence = true
			st.seq++
		}
	}
	for name, st := range e.works {
		if st.seq > st.doneSeq {
			e.queue.Add(name)
		}
	}
}
