package agent

import (
	"sync"
	"time"
)

// Stats describe the agent's current connection to the hub.
type Stats struct {
	// Connected is true between Welcome and the end of the session.
	Connected bool
	// HubID names the hub replica of the current or last session.
	HubID string
	// ConnectedSince is when the current session got its Welcome.
	ConnectedSince time.Time
	// LastAck is when the last LeaseAck arrived (agent clock).
	LastAck time.Time
	// RoundTrip is the round-trip time of the last acknowledged renewal.
	RoundTrip time.Duration
	// ClockOffset estimates how far the hub's clock is ahead of the
	// agent's (negative: behind), from the last acknowledged renewal.
	ClockOffset time.Duration
}

// statsBox guards Stats for concurrent readers.
type statsBox struct {
	mu sync.Mutex
	s  Stats
}

func (b *statsBox) get() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s
}

func (b *statsBox) update(f func(*Stats)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.s)
}

// estimateClock derives the round-trip time and the hub's clock offset from
// one renewal: sent and received on the agent's clock, hubTime stamped by
// the hub in between. It assumes the hub stamped the renewal half-way.
func estimateClock(sent, received, hubTime time.Time) (rtt, offset time.Duration) {
	rtt = max(received.Sub(sent), 0)
	offset = hubTime.Sub(sent.Add(rtt / 2))
	return rtt, offset
}

// maxPendingRenewals bounds the renewals remembered while waiting for acks;
// a hub that never acks must not grow the agent's memory.
const maxPendingRenewals = 64

// pendingRenewals remembers when each unacknowledged renewal was sent, and
// how many packets the connection had received from the hub by then. The
// renew loop adds and the ack readers take, so it is locked.
type pendingRenewals struct {
	mu   sync.Mutex
	sent map[uint64]pendingRenewal
	// dropped is the oldest renewal forgotten for the bound while still
	// unacknowledged (droppedSeq 0: none): the ack timeout counts from it,
	// however many renewals followed.
	dropped    pendingRenewal
	droppedSeq uint64
}

type pendingRenewal struct {
	at      time.Time
	packets uint64 // packets received from the hub when it was sent
}

func (p *pendingRenewals) add(seq uint64, at time.Time, packets uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent == nil {
		p.sent = make(map[uint64]pendingRenewal)
	}
	if len(p.sent) >= maxPendingRenewals {
		old := seq - maxPendingRenewals
		if r, ok := p.sent[old]; ok && p.droppedSeq == 0 {
			p.dropped, p.droppedSeq = r, old
		}
		delete(p.sent, old)
	}
	p.sent[seq] = pendingRenewal{at: at, packets: packets}
}

// take returns when seq was sent and forgets it and every older renewal.
func (p *pendingRenewals) take(seq uint64) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.sent[seq]
	for s := range p.sent {
		if s <= seq {
			delete(p.sent, s)
		}
	}
	if seq >= p.droppedSeq {
		p.droppedSeq = 0
	}
	return r.at, ok
}

// newest returns when the newest unacknowledged renewal was sent, and
// false if every renewal was acknowledged.
func (p *pendingRenewals) newest() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, r := range p.sent {
		if r.at.After(last) {
			last = r.at
		}
	}
	return last, !last.IsZero()
}

// count is how many renewals are unacknowledged.
func (p *pendingRenewals) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

// oldest returns the oldest unacknowledged renewal, and false if every
// renewal was acknowledged.
func (p *pendingRenewals) oldest() (pendingRenewal, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.droppedSeq != 0 {
		return p.dropped, true
	}
	var first pendingRenewal
	for _, r := range p.sent {
		if first.at.IsZero() || r.at.Before(first.at) {
			first = r
		}
	}
	return first, !first.at.IsZero()
}
