package hub

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/flotilla-io/flotilla/protocol"
)

// Per-session rates of what an agent sends. An honest agent renews every
// quarter of its lease and reports its status every few seconds; beyond
// these rates renewals are answered without being stamped again and status
// reports are coalesced (the latest wins), so a hostile or broken agent
// costs the hub a bounded amount of work, however fast it sends.
const (
	renewalsPerSecond = 10
	renewalBurst      = 20
	reportsPerSecond  = 4
	reportBurst       = 8
)

// sessionLimits are the rates every session gets.
type sessionLimits struct {
	renewals, reports rate.Limit
	renewalBurst      int
	reportBurst       int
	// limitedRenewals and coalescedReports count what the limits held
	// back, across sessions.
	limitedRenewals, coalescedReports atomic.Int64
}

func defaultSessionLimits() sessionLimits {
	return sessionLimits{renewals: renewalsPerSecond, renewalBurst: renewalBurst, reports: reportsPerSecond, reportBurst: reportBurst}
}

// sessionLimiters are one session's token buckets.
type sessionLimiters struct {
	renewals, reports *rate.Limiter
}

func (l *sessionLimits) forSession() sessionLimiters {
	return sessionLimiters{renewals: rate.NewLimiter(l.renewals, l.renewalBurst), reports: rate.NewLimiter(l.reports, l.reportBurst)}
}

// latestReport holds the newest status report not yet applied: reports
// that arrive faster than they may be applied replace each other.
type latestReport struct {
	mu     sync.Mutex
	report *protocol.ClusterStatus
	ready  chan struct{} // a report is waiting
}

func newLatestReport() *latestReport { return &latestReport{ready: make(chan struct{}, 1)} }

// put stores report, replacing (and returning true for) one not applied.
func (l *latestReport) put(report *protocol.ClusterStatus) (replaced bool) {
	l.mu.Lock()
	replaced = l.report != nil
	l.report = report
	l.mu.Unlock()
	select {
	case l.ready <- struct{}{}:
	default:
	}
	return replaced
}

// take returns the waiting report, nil if none.
func (l *latestReport) take() *protocol.ClusterStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.report
	l.report = nil
	return r
}

// applyReports applies the session's status reports at the session's
// rate until ctx ends.
func (s *agentServer) applyReports(ctx context.Context, sess *agentSession, reports *latestReport) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reports.ready:
		}
		if err := sess.limits.reports.Wait(ctx); err != nil {
			return
		}
		report := reports.take()
		if report == nil {
			continue
		}
		if err := s.backend.Status(sess.cluster, report); err != nil {
			s.logger.Warn("cluster status rejected", "cluster", sess.cluster, "err", err)
		}
	}
}
