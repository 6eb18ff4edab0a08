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

// runElected takes part in the election until ctx ends, running the agent
// while it leads. Only the leader holds a hub session: the agent's session
// is closed before the Lease is released on shutdown, and a replica that
// fails to renew stops its agent at once (client-go gives up after the
// renew deadline, before a standby may take over after the lease
// duration) and returns errLostLeadership.
func (r *runner) runElected(ctx context.Context) error {
	le := r.cfg.LeaderElection
	id, err := leaderIdentity()
	if err != nil {
		return err
	}
	log := r.log.With("identity", id, "lease", r.cfg.SystemNamespace+"/"+le.LeaseName)
	if r.cfg.CertDir != "" {
		log.Warn("leader election with a certificate directory: a new leader finds what the previous one joined or renewed only if they share the directory; use a certificate Secret")
	}
	// The Lease lives in the system namespace; make it if it is missing
	// (the election retries and says why if this fails).
	if err := work.EnsureNamespace(ctx, r.clients.kube, r.cfg.SystemNamespace); err != nil && ctx.Err() == nil {
		log.Warn("cannot make sure the system namespace exists", "err", err)
	}
	lock := &observedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: r.cfg.SystemNamespace, Name: le.LeaseName},
		Client:     r.clients.kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}, seen: r.lockSeen.Store}

	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	started := make(chan struct{}) // closed when this replica starts leading
	led := make(chan error, 1)     // the agent's result, once it led
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: le.LeaseName, WatchDog: r.watchdog,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		// Released by hand once the agent stopped: client-go would
		// release before the agent's session is closed, and would delay
		// stopping a leader that failed to renew by the release attempt.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				close(started)
				log.Info("elected leader: starting the agent")
				runCtx, cancel := context.WithCancel(agentCtx)
				defer cancel()
				stop := context.AfterFunc(leadCtx, cancel) // leadership lost
				defer stop()
				led <- r.lead(runCtx)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	r.watchdog.SetLeaderElection(elector)
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx)
	}()
	log.Info("standing for leader election", "leaseDuration", le.LeaseDuration, "renewDeadline", le.RenewDeadline, "retryPeriod", le.RetryPeriod)

	select {
	case <-ctx.Done(): // stopping: the session says goodbye, then the Lease goes
		stopElecting()
		<-electorDone
		if leading(started) {
			<-led
			r.release(lock, id, log)
		}
		return nil
	case err := <-led: // the agent stopped by itself (a refused join), or lost the lead
		stopElecting()
		<-electorDone
		if ctx.Err() != nil || err != nil { // stopping after all, or failed
			r.release(lock, id, log)
			return err
		}
		return r.lostLeadership(log)
	case <-electorDone: // renewing failed: only this ends the elector
		if leading(started) {
			r.waitStopped(led, log)
		}
		return r.lostLeadership(log)
	}
}

// leading says whether this replica started leading.
func leading(started <-chan struct{}) bool {
	select {
	case <-started:
		return true
	default:
		return false
	}
}

func (r *runner) lostLeadership(log *slog.Logger) error {
	log.Error("stopped leading: the agent stopped and the process exits, to restart as a standby")
	return errLostLeadership
}

// waitStopped waits for the agent of a replica that stopped leading, as
// long as a standby cannot take over yet: the lease duration after the
// last renewal, of which the renew deadline and a retry period are gone.
// Beyond that, the process exits regardless, which ends the session too.
func (r *runner) waitStopped(led <-chan error, log *slog.Logger) {
	le := r.cfg.LeaderElection
	t := time.NewTimer(max(le.LeaseDuration-le.RenewDeadline-le.RetryPeriod, time.Second))
	defer t.Stop()
	select {
	case <-led:
	case <-t.C:
		if a := r.agent.Load(); a != nil && a.Stats().Connected {
			log.Warn("the hub session did not end in time after the lead was lost; exiting regardless")
		} else {
			log.Info("the hub session ended; exiting without waiting for the Work engine's watches to stop")
		}
	}
}

// releaseTimeout bounds releasing the Lease on the way out.
const releaseTimeout = 5 * time.Second

// release gives up the Lease if this replica still holds it, as client-go
// does (no holder, a one-second lease), so that a standby takes over at
// its next try instead of after the lease duration.
func (r *runner) release(lock resourcelock.Interface, id string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil {
		log.Warn("cannot release the leader election Lease", "err", err)
		return
	}
	if record.HolderIdentity != id {
		return
	}
	now := metav1.Now()
	err = lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		LeaderTransitions: record.LeaderTransitions})
	if err != nil {
		log.Warn("cannot release the leader election Lease", "err", err)
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
