package controllertest

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// WaitTimeout bounds every wait of the controllers' tests.
const WaitTimeout = 10 * time.Second

// Fixture is the test binary's API server with a namespace for the test's
// objects, and at most one controller running at a time.
type Fixture struct {
	T         *testing.T
	Env       *hubapi.Env
	Namespace string // the test's: deleted with its contents at test end
	Flotilla  flotillav1alpha1.FlotillaV1alpha1Interface
	// T0 is the current second when the fixture was made: the start of the
	// tests' fake clocks, and the time of the status they write.
	T0 time.Time
	// Events are the events the controller records.
	Events *Recorder

	stop  func()
	wakes wakes
}

// New returns the fixture of a test. At test end the controller stops,
// then the test's namespace and every cluster-scoped Flotilla object go.
func New(t *testing.T) *Fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // cluster-scoped objects: clusters, cluster bindings, purge requests, rebalancers
	f := &Fixture{T: t, Env: env, Namespace: env.Namespace(t), Flotilla: env.Flotilla.FlotillaV1alpha1(),
		T0: time.Now().Truncate(time.Second), Events: &Recorder{}}
	// Registered after the namespace's: runs first, stopping the controller
	// before its objects go.
	t.Cleanup(f.Stop)
	return f
}

// Controller is a hub controller: Run works its queue until ctx ends.
type Controller interface {
	Run(ctx context.Context, workers int)
}

// Start makes a controller with build, on clients and informers of its
// own, starts the informers and runs the controller with workers until
// Stop or the end of the test. wrapTransport, unless nil, wraps the
// transport of the controller's clients.
func (f *Fixture) Start(wrapTransport func(http.RoundTripper) http.RoundTripper, workers int, build func(*kube.Clients, *controller.Informers) Controller) {
	f.T.Helper()
	cfg := f.Env.RESTConfig()
	cfg.WrapTransport = wrapTransport
	clients, err := kube.NewClients(cfg)
	if err != nil {
		f.T.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	c := build(clients, informers)
	ctx, cancel := context.WithCancel(context.Background())
	informers.Start(ctx)
	done := make(chan struct{})
	go func() { c.Run(ctx, workers); close(done) }()
	f.stop = func() { cancel(); <-done }
}

// Stop stops the controller, if one runs, and waits until it has.
func (f *Fixture) Stop() {
	if f.stop != nil {
		f.stop()
		f.stop = nil
	}
}

// Logger logs at Info to the test's output.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// LoggerCountingRetries is Logger that also counts in retries the queue's
// "reconcile failed; retrying" logs: writes that went back to the queue.
func LoggerCountingRetries(t testing.TB, retries *atomic.Int64) *slog.Logger {
	return slog.New(countingHandler{Logger(t).Handler(), retries})
}

type countingHandler struct {
	slog.Handler
	retries *atomic.Int64
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reconcile failed; retrying" {
		h.retries.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(attrs), h.retries}
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(name), h.retries}
}
