package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/flotilla-io/flotilla/internal/profiling"
)

// runner is one agent process: its HTTP endpoints, and the agent, which
// runs at once or, with leader election, only while this replica leads.
type runner struct {
	cfg     Config
	clients kubeClients
	log     *slog.Logger
	// agent is the running agent, nil while standing by.
	agent atomic.Pointer[Agent]
	// Leader election only: the watchdog /healthz consults, and when
	// this replica last read the election Lease (unix nanoseconds).
	watchdog *leaderelection.HealthzAdaptor
	lockSeen atomic.Int64
}

// Run validates cfg and runs an agent until ctx ends, serving its HTTP
// endpoints if cfg.HTTPAddr is set and Go's profiles if cfg.ProfilingAddr
// is. With leader election it runs the
// agent only while this replica leads: it returns errLostLeadership
// (after the agent closed its hub session) when the replica stops
// leading, so that the process exits and restarts as a standby.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("invalid agent configuration: %w", err)
	}
	clients, err := newKubeClients(cfg)
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, clients: clients, log: cfg.Logger.With("cluster", cfg.ClusterName)}
	if cfg.LeaderElection.Enabled {
		// Beyond the lease, a leader that has not renewed is unhealthy.
		r.watchdog = leaderelection.NewLeaderHealthzAdaptor(cfg.LeaderElection.RenewDeadline)
		cfg.metrics.leaderElection.Set(1)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer stopHTTP() // before wg.Wait
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		switch {
		case err != nil && cfg.HTTPAddrOptional:
			r.log.Warn("no HTTP endpoints: cannot listen on the default address (give --http-addr)", "err", err)
		case err != nil:
			return fmt.Errorf("HTTP endpoints: %w", err)
		default:
			if cfg.onHTTP != nil {
				cfg.onHTTP(ln.Addr())
			}
			wg.Go(func() { r.serveHTTP(httpCtx, ln) })
		}
	}
	profLn, err := profiling.Listen(cfg.ProfilingAddr)
	if err != nil {
		return err
	}
	if profLn != nil {
		wg.Go(func() { profiling.Serve(httpCtx, profLn, r.log) })
	}
	if !cfg.LeaderElection.Enabled {
		return r.lead(ctx)
	}
	return r.runElected(ctx)
}

// lead runs the agent, reading its credentials now: with leader election
// the previous leader may have joined or renewed a moment ago.
func (r *runner) lead(ctx context.Context) error {
	a, err := newAgentWithCredentials(ctx, r.cfg, r.clients)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // stopped while reading the credentials
		}
		return err
	}
	r.agent.Store(a)
	defer r.agent.Store(nil)
	r.cfg.metrics.leader.Set(1)
	defer r.cfg.metrics.leader.Set(0)
	return a.Run(ctx)
}

// serveHTTP serves the endpoints on ln until ctx ends.
func (r *runner) serveHTTP(ctx context.Context, ln net.Listener) {
	srv := &http.Server{Handler: r.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		r.log.Error("HTTP endpoints stopped", "err", err)
	}
	<-shutDown
}
