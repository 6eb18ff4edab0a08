package agentserver

import (
	"sync"
	"sync/atomic"
	"time"

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

// reportPacer applies a session's status reports at the session's rate
// without a goroutine of its own: a report within the rate is applied at
// once by the stream's reader; one beyond it waits for its turn on a timer
// (time.AfterFunc holds no goroutine while it waits), replaced by any
// newer one. At 10,000 agents a waiting goroutine per session cost tens
// of megabytes of stacks.
type reportPacer struct {
	limiter *rate.Limiter
	apply   func(*protocol.ClusterStatus)

	mu      sync.Mutex // held while applying: reports apply in order
	pending *protocol.ClusterStatus
	timer   *time.Timer // set while a report waits for its turn
	stopped bool
}

func newReportPacer(limiter *rate.Limiter, apply func(*protocol.ClusterStatus)) *reportPacer {
	return &reportPacer{limiter: limiter, apply: apply}
}

// put applies report now, or keeps it until its turn; it reports whether
// it replaced one still waiting.
func (p *reportPacer) put(report *protocol.ClusterStatus) (replaced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopped:
		return false
	case p.timer != nil:
		replaced = p.pending != nil
		p.pending = report
		return replaced
	}
	if wait := p.limiter.Reserve().Delay(); wait > 0 {
		p.pending = report
		p.timer = time.AfterFunc(wait, p.fire) // a rate in real time, as the limiter's
		return false
	}
	p.apply(report)
	return false
}

// fire applies the report waiting for its turn.
func (p *reportPacer) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	report := p.pending
	p.pending = nil
	if p.stopped || report == nil {
		return
	}
	p.apply(report)
}

// stop drops a waiting report: the session's status stream ended.
func (p *reportPacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped, p.pending = true, nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
