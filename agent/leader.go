package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/flotilla-io/flotilla/agent/work"
)

// errLostLeadership ends an agent process whose replica stopped leading:
// it exits non-zero, and restarts as a standby.
var errLostLeadership = errors.New("lost the leader election: the agent stopped; restart to stand by")

// leaderIdentity names this replica in the election Lease: the pod's name
// (env POD_NAME, from the downward API) or the host name, and a random
// suffix, so that a restarted pod never mistakes itself for the leader it
// was.
func leaderIdentity() (string, error) {
	name := os.Getenv("POD_NAME")
	if name == "" {
		var err error
		if name, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("leader election identity: %w", err)
		}
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return name + "_" + hex.EncodeToString(suffix), nil
}

// election is this replica's part in the leader election.
type election struct {
	id      string
	log     *slog.Logger
	lock    *observedLock
	elector *leaderelection.LeaderElector
	// led receives the agent's result once this replica led: one value
	// if the elector acquired the Lease, none otherwise.
	led chan error
}

// runElected takes part in the election until ctx ends, running the agent
// while it leads. Only the leader holds a hub session: the agent's session
// is closed before the Lease is released on shutdown, and a replica that
// fails to renew stops its agent at once (client-go gives up after the
// renew deadline, before a standby may take over after the lease
// duration) and returns errLostLeadership.
func (r *runner) runElected(ctx context.Context) error {
	e, err := r.newElection(ctx)
	if err != nil {
		return err
	}
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		e.elector.Run(electCtx)
	}()
	le := r.cfg.LeaderElection
	e.log.Info("standing for leader election", "leaseDuration", le.LeaseDuration, "renewDeadline", le.RenewDeadline, "retryPeriod", le.RetryPeriod)

	select {
	case <-ctx.Done(): // stopping: the session says goodbye, then the Lease goes
		stopElecting()
		<-electorDone
		if e.elector.IsLeader() { // it acquired the Lease, so the agent ran
			<-e.led
			r.release(e)
		}
		return nil
	case err := <-e.led: // the agent stopped by itself (a refused join), or lost the lead
		stopElecting()
		<-electorDone
		if ctx.Err() != nil || err != nil { // stopping after all, or failed
			r.release(e)
			return err
		}
		return r.lostLeadership(e.log)
	case <-electorDone: // only a failed renewal ends the elector: it led
		r.waitStopped(e.led, e.log)
		return r.lostLeadership(e.log)
	}
}

// newElection makes this replica's identity, Lease lock and elector,
// whose agent runs under ctx while it leads.
func (r *runner) newElection(ctx context.Context) (*election, error) {
	le := r.cfg.LeaderElection
	id, err := leaderIdentity()
	if err != nil {
		return nil, err
	}
	e := &election{id: id, log: r.log.With("identity", id, "lease", r.cfg.SystemNamespace+"/"+le.LeaseName), led: make(chan error, 1)}
	if r.cfg.CertDir != "" {
		e.log.Warn("leader election with a certificate directory: a new leader finds what the previous one joined or renewed only if they share the directory; use a certificate Secret")
	}
	// The Lease lives in the system namespace; make it if it is missing
	// (the election retries and says why if this fails).
	if err := work.EnsureNamespace(ctx, r.clients.kube, r.cfg.SystemNamespace); err != nil && ctx.Err() == nil {
		e.log.Warn("cannot make sure the system namespace exists", "err", err)
	}
	e.lock = &observedLock{Interface: &ownedLeaseLock{client: r.clients.kube.CoordinationV1(),
		namespace: r.cfg.SystemNamespace, name: le.LeaseName, identity: id, owner: r.clients.owner,
	}, seen: r.lockSeen.Store}
	e.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: e.lock, Name: le.LeaseName, WatchDog: r.watchdog,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		// Released by hand once the agent stopped: client-go would
		// release before the agent's session is closed, and would delay
		// stopping a leader that failed to renew by the release attempt.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				e.log.Info("elected leader: starting the agent")
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				stop := context.AfterFunc(leadCtx, cancel) // leadership lost
				defer stop()
				e.led <- r.lead(runCtx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != id {
					e.log.Info("standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	r.watchdog.SetLeaderElection(e.elector)
	return e, nil
}

func (r *runner) lostLeadership(log *slog.Logger) error {
	log.Error("stopped leading: the agent stopped and the process exits, to restart as a standby")
	return errLostLeadership
}

// waitStopped waits for the agent of a replica that stopped leading. Its
// hub session must end before a standby may take over: the lease duration
// after the last renewal, of which the renew deadline and a retry period
// are gone. A session still open then is ended by exiting at once; once
// it has ended, the rest of the agent (the Work engine's watches) is
// waited for.
func (r *runner) waitStopped(led <-chan error, log *slog.Logger) {
	le := r.cfg.LeaderElection
	t := time.NewTimer(max(le.LeaseDuration-le.RenewDeadline-le.RetryPeriod, time.Second))
	defer t.Stop()
	select {
	case <-led:
		return
	case <-t.C:
	}
	if a := r.agent.Load(); a != nil && a.Stats().Connected {
		log.Warn("the hub session did not end in time after the lead was lost; exiting regardless")
		return
	}
	<-led
}

// releaseTimeout bounds releasing the Lease on the way out.
const releaseTimeout = 5 * time.Second

// release gives up the Lease if this replica still holds it, as client-go
// does (no holder, a one-second lease), so that a standby takes over at
// its next try instead of after the lease duration.
func (r *runner) release(e *election) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	record, _, err := e.lock.Get(ctx)
	if err != nil {
		e.log.Warn("cannot release the leader election Lease", "err", err)
		return
	}
	if record.HolderIdentity != e.id {
		return
	}
	now := metav1.Now()
	err = e.lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		LeaderTransitions: record.LeaderTransitions})
	if err != nil {
		e.log.Warn("cannot release the leader election Lease", "err", err)
	}
}

// observedLock is a resource lock that notes when the Lease could be read:
// a standby is ready while it can, for it could then take over.
type observedLock struct {
	resourcelock.Interface
	seen func(unixNano int64)
}

func (l *observedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	if err == nil || apierrors.IsNotFound(err) {
		l.seen(time.Now().UnixNano())
	}
	return record, raw, err
}
