package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection lets several hub replicas share one store: the elected
// one leads (controllers, health decisions, agent listeners), the others
// stand by and take over when its Lease expires.
type LeaderElection struct {
	Enabled bool
	// LeaseDuration is how long a standby waits after the last renewal it
	// saw before it takes over; RenewDeadline is how long the leader keeps
	// trying to renew before it gives up leading; RetryPeriod is how often
	// both try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Where the hub replicas' election Lease lives in the hub's API.
const (
	leaderLeaseNamespace = metav1.NamespaceSystem
	leaderLeaseName      = "flotilla-hub"
)

// ErrLostLeadership ends a replica that could not renew its Lease in time:
// another may lead already, so it stops (and restarts as a standby).
var ErrLostLeadership = errors.New("lost the hub leader election: this replica stopped; restart it to stand by")

// runElected stands for election until ctx ends and leads while elected.
// The Lease is released only after lead has stopped (said goodbye to its
// agents and stored what changed), so two replicas never lead at once on
// a graceful hand-over.
func (r *replica) runElected(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(r.api.HubConfig)
	if err != nil {
		return err
	}
	id, err := electionIdentity(r.cfg.HubID)
	if err != nil {
		return err
	}
	le := r.cfg.LeaderElection
	log := r.cfg.Logger.With("identity", id, "lease", leaderLeaseNamespace+"/"+leaderLeaseName)
	var leader atomic.Pointer[string]
	var started atomic.Bool
	led := make(chan error, 1)
	// The elector runs on a context of its own: cancelling it releases
	// the Lease, which must wait until lead has returned.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: leaderLeaseNamespace, Name: leaderLeaseName},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "flotilla-hub",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				started.Store(true)
				log.Info("elected: this replica leads")
				// Lead until the hub stops or the Lease is lost.
				runCtx, cancel := context.WithCancelCause(leadCtx)
				defer cancel(nil)
				stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
				defer stop()
				led <- r.lead(runCtx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				leader.Store(&identity)
				if identity != id {
					log.Info("standing by: another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("hub leader election: %w", err)
	}
	r.http.setStandby(standbyHandler(r, &leader))
	log.Info("standing for leader election", "leaseDuration", le.LeaseDuration, "renewDeadline", le.RenewDeadline, "retryPeriod", le.RetryPeriod)
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx)
	}()
	select {
	case <-ctx.Done(): // stopping: lead says goodbye, then the Lease goes
		var err error
		if elector.IsLeader() {
			err = <-led
		}
		stopElecting()
		<-electorDone
		if started.Load() && err == nil { // it won just now: lead stops at once
			err = <-led
		}
		return err
	case err := <-led: // lead failed by itself
		stopElecting()
		<-electorDone
		return err
	case <-electorDone: // only a failed renewal ends the elector: it led
		<-led
		return ErrLostLeadership
	}
}

// electionIdentity names this replica in the Lease: its hub ID and a
// random suffix, so a restarted replica never takes itself for the leader
// it was (it waits for the Lease to expire, or to be released).
func electionIdentity(hubID string) (string, error) {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return hubID + "_" + hex.EncodeToString(suffix), nil
}

// standbyHandler serves a standby replica's HTTP endpoints: it is alive,
// not ready (the agent listeners and controllers run on the leader), and
// points everything else at the leader.
func standbyHandler(r *replica, leader *atomic.Pointer[string]) http.Handler {
	leaderName := func() string {
		if l := leader.Load(); l != nil && *l != "" {
			return *l
		}
		return "none yet"
	}
	probes := []probe{storeProbe(r.store)}
	// A labelled leader pod is what routes agents: a standby is ready to
	// take over, which lets a StatefulSet roll it.
	if r.labeler == nil {
		probes = append(probes, probe{name: "leader", check: func(context.Context) error {
			return fmt.Errorf("standing by: the leader is %s", leaderName())
		}})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /livez", livez)
	mux.HandleFunc("GET /readyz", readyz(probes))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this hub replica stands by: the dashboard, metrics and agent listeners run on the leader, "+leaderName()+
			" (the Kubernetes API on --api-addr serves on every replica)", http.StatusServiceUnavailable)
	})
	return mux
}

// switchHandler serves the leader's endpoints while it leads and the
// standby's otherwise.
type switchHandler struct {
	leading, standby atomic.Pointer[http.Handler]
}

func (h *switchHandler) set(leading http.Handler)        { storeHandler(&h.leading, leading) }
func (h *switchHandler) setStandby(standby http.Handler) { storeHandler(&h.standby, standby) }

func storeHandler(p *atomic.Pointer[http.Handler], h http.Handler) {
	if h == nil {
		p.Store(nil)
		return
	}
	p.Store(&h)
}

func (h *switchHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	for _, p := range []*atomic.Pointer[http.Handler]{&h.leading, &h.standby} {
		if handler := p.Load(); handler != nil {
			(*handler).ServeHTTP(w, req)
			return
		}
	}
	http.Error(w, "the hub is starting", http.StatusServiceUnavailable)
}
