package agent

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpHandler serves the agent's endpoints:
//
//   - /livez (and /healthz, its older name): the process serves HTTP and, with leader election, a
//     leader has renewed its Lease within the lease duration plus the
//     renew deadline (client-go's HealthzAdaptor): a leader wedged
//     without exiting is restarted.
//   - /readyz: the agent can do its job. Running the agent (leader, or
//     leader election off): a hub session the hub welcomed is open.
//     Standing by: its last read of the election Lease, which it repeats
//     every retry period, succeeded within the lease duration, so it can
//     take over.
//   - /metrics: the Prometheus metrics (metrics.go).
func (r *runner) httpHandler() http.Handler {
	mux := http.NewServeMux()
	live := func(w http.ResponseWriter, req *http.Request) {
		if r.watchdog != nil {
			if err := r.watchdog.Check(req); err != nil {
				http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	}
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.ready(time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.cfg.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// ready says why the agent is not ready, or nil.
func (r *runner) ready(now time.Time) error {
	if a := r.agent.Load(); a != nil {
		if !a.Stats().Connected {
			return fmt.Errorf("leading, but not connected to the hub %s", r.cfg.Hub)
		}
		return nil
	}
	if !r.cfg.LeaderElection.Enabled {
		return fmt.Errorf("starting: not connected to the hub %s", r.cfg.Hub)
	}
	seen := time.Unix(0, r.lockSeen.Load())
	if r.lockSeen.Load() == 0 || now.Sub(seen) > r.cfg.LeaderElection.LeaseDuration {
		return fmt.Errorf("standing by, but cannot read the election Lease %s/%s of the member cluster (last read %s)",
			r.cfg.SystemNamespace, r.cfg.LeaderElection.LeaseName, describeSince(seen, now, r.lockSeen.Load() != 0))
	}
	return nil
}

func describeSince(t, now time.Time, ok bool) string {
	if !ok {
		return "never"
	}
	return now.Sub(t).Round(time.Millisecond).String() + " ago"
}
