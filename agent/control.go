package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

// minRenewInterval keeps a hub's tiny renew interval from turning the
// agent into a busy loop.
const minRenewInterval = 10 * time.Millisecond

// renewInterval is the hub's requested interval, or a quarter of the lease
// if the hub named none.
func renewInterval(w *protocol.Welcome, lease time.Duration) time.Duration {
	if w.RenewIntervalMillis > 0 {
		return max(time.Duration(w.RenewIntervalMillis)*time.Millisecond, minRenewInterval)
	}
	return lease / 4
}

// errNoLeaseAck ends a session whose hub stopped acknowledging renewals.
var errNoLeaseAck = errors.New("no lease acknowledgement from the hub")

// renewLoop sends LeaseRenew at once and then every interval until ctx ends.
// A hub that has not acknowledged a renewal for a whole lease is not
// renewing it: the session ends so the agent redials, instead of staying
// "connected" while the hub lets the cluster expire.
func (s *session) renewLoop(ctx context.Context, interval, ackTimeout time.Duration) error {
	ticker := s.agent.clock.NewTicker(interval)
	defer ticker.Stop()
	for seq := uint64(1); ; seq++ {
		now := s.agent.clock.Now()
		if oldest, ok := s.pending.oldest(); ok && now.Sub(oldest) >= ackTimeout {
			return fmt.Errorf("%w for %v (lease %v)", errNoLeaseAck, now.Sub(oldest).Round(time.Millisecond), ackTimeout)
		}
		s.pending.add(seq, now)
		if err := s.writeControl(&protocol.LeaseRenew{Seq: seq, AgentTime: now}, writeTimeout); err != nil {
			return fmt.Errorf("send lease renewal %d: %w", seq, explainConnError(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// readControl reads the hub's messages on the control stream until one ends
// the session or the stream fails. It stops when the connection closes.
func (s *session) readControl() error {
	for {
		m, err := s.reader.ReadMessage()
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("hub closed the control stream")
		case malformed(err):
			return fmt.Errorf("%w: control stream: %w", errProtocol, err)
		case err != nil:
			return fmt.Errorf("read control stream: %w", explainConnError(err))
		}
		switch m := m.(type) {
		case *protocol.LeaseAck:
			s.onAck(m)
		case *protocol.GoAway:
			return &goAwayError{reason: m.Reason}
		case *protocol.Error:
			return fmt.Errorf("hub ended the session: %w", m)
		default:
			return fmt.Errorf("%w: unexpected %v on the control stream", errProtocol, m.Type())
		}
	}
}

// onAck measures round-trip time and clock offset from an acknowledged
// renewal, and tells the Work engine that the hub was there when the
// renewal was sent (fencing counts from that contact).
func (s *session) onAck(ack *protocol.LeaseAck) {
	sent, ok := s.pending.take(ack.Seq)
	if !ok {
		s.log.Debug("lease ack for an unknown renewal", "seq", ack.Seq)
		return
	}
	s.agent.works.Contact(sent, s.renewEvery)
	now := s.agent.clock.Now()
	rtt, offset := estimateClock(sent, now, ack.HubTime)
	s.agent.cfg.metrics.renewalRTT.Observe(rtt.Seconds())
	s.agent.stats.update(func(st *Stats) {
		st.LastAck, st.RoundTrip, st.ClockOffset = now, rtt, offset
	})
	s.log.Debug("lease renewed", "seq", ack.Seq, "rtt", rtt, "clockOffset", offset)
}
