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

// Renewal transports, as the renewals_sent metric names them.
const (
	transportDatagram = "datagram"
	transportStream   = "stream"
)

// With datagrams a renewal that is not acknowledged within a quarter of
// the renew interval is followed by a fresh one (a new Seq and time, not
// a copy), and for a lease after that the agent renews every quarter
// interval: on a link that drops or flaps, the last renewal before an
// outage then went at most a quarter interval before it, and the first
// after it goes within a quarter interval of the link coming back, so an
// outage shorter than the grace period less half an interval never costs
// the lease. That is at most renewTriesPerInterval renewals an interval,
// only while renewals go missing; the hub takes up to 10 a second.
const renewTriesPerInterval = 4

// hubAlivePackets is the fewest packets from the hub, received while no
// renewal was acknowledged, that show the path works and the hub does not
// renew (a wedged hub's QUIC still acknowledges every renewal datagram).
// With loss alone, the hub's packets carry its acks and are lost with
// them; a path that delivers nothing is left to QUIC's idle timeout.
const hubAlivePackets = 3

// renewLoop sends LeaseRenew at once and then every interval until ctx
// ends, as a datagram when the hub takes them (and every quarter interval
// for a lease after one went unacknowledged), else on the control stream.
// A hub that has not acknowledged a renewal for a whole lease is not
// renewing it: the session ends so the agent redials, instead of staying
// "connected" while the hub lets the cluster expire.
func (s *session) renewLoop(ctx context.Context, interval, ackTimeout time.Duration) error {
	step, transport := interval, transportStream
	if s.datagrams {
		step, transport = max(interval/renewTriesPerInterval, minRenewInterval), transportDatagram
	}
	ticker := s.agent.clock.NewTicker(step)
	defer ticker.Stop()
	sent := s.agent.cfg.metrics.renewalsSent.WithLabelValues(transport)
	retries := s.agent.cfg.metrics.renewalRetries
	var next time.Time       // when the next regular renewal is due
	var lossyUntil time.Time // renew every step until then: renewals went missing
	for seq := uint64(1); ; {
		now := s.agent.clock.Now()
		packets := s.conn.PacketsReceived()
		if err := s.checkAcks(now, ackTimeout, packets); err != nil {
			return err
		}
		regular := !now.Before(next)
		if s.retryDue(now, step) {
			lossyUntil = now.Add(ackTimeout)
		}
		if regular || now.Before(lossyUntil) {
			s.pending.add(seq, now, packets)
			if err := s.sendRenewal(&protocol.LeaseRenew{Seq: seq, AgentTime: now}); err != nil {
				return fmt.Errorf("send lease renewal %d: %w", seq, explainConnError(err))
			}
			seq++
			sent.Inc()
			if regular {
				next = now.Add(interval)
			} else {
				retries.Inc()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// retryDue reports whether, with datagrams, the newest renewal has gone
// unacknowledged for a step (and two round trips, on a slow link).
func (s *session) retryDue(now time.Time, step time.Duration) bool {
	if !s.datagrams {
		return false
	}
	newest, ok := s.pending.newest()
	if !ok {
		return false
	}
	// Ticks of a real clock come a little early or late.
	wait := max(step-step/10, 2*s.agent.stats.get().RoundTrip)
	return now.Sub(newest) >= wait
}

// datagramAckLeases is how many leases pass without an acknowledged
// datagram renewal before a hub whose packets still arrive counts as
// wedged. Under 40 % loss each way a renewal and its ack both get through
// with a chance of 0.36: the 16 renewals of one lease all fail about once
// in 1,300 leases (a 10-minute run of 40 % loss ended a healthy session
// that way), the 32 of two about once in 1.6 million.
const datagramAckLeases = 2

// checkAcks ends the session when no renewal was acknowledged for
// ackTimeout: on the control stream, which delivers everything or breaks,
// that alone; with datagrams after datagramAckLeases of them, and only if
// the hub's packets kept arriving, as many as half the renewals sent
// meanwhile (at least hubAlivePackets).
func (s *session) checkAcks(now time.Time, ackTimeout time.Duration, packets uint64) error {
	wait := ackTimeout
	if s.datagrams {
		wait *= datagramAckLeases
	}
	oldest, ok := s.pending.oldest()
	if !ok {
		return nil
	}
	// With other hub replicas to go to, a hub that sent nothing at all for
	// a lease is taken for dead (a killed replica sends no reset): its
	// clusters move before the new leader's grace runs out.
	if silent := now.Sub(oldest.at); silent >= ackTimeout && packets == oldest.packets && s.otherHubs {
		return fmt.Errorf("%w for %v (lease %v), nor any packet: trying the other hub replicas", errNoLeaseAck, silent.Round(time.Millisecond), ackTimeout)
	}
	if now.Sub(oldest.at) < wait {
		return nil
	}
	if s.datagrams && packets-oldest.packets < max(hubAlivePackets, uint64(s.pending.count())/2) {
		return nil
	}
	return fmt.Errorf("%w for %v (lease %v)", errNoLeaseAck, now.Sub(oldest.at).Round(time.Millisecond), ackTimeout)
}

// sendRenewal sends one renewal on the session's transport.
func (s *session) sendRenewal(renew *protocol.LeaseRenew) error {
	if !s.datagrams {
		return s.writeControl(renew, writeTimeout)
	}
	return protocol.SendDatagram(s.conn, renew)
}

// readDatagrams reads the hub's lease acks sent as datagrams until ctx or
// the connection ends.
func (s *session) readDatagrams(ctx context.Context) error {
	for {
		b, err := s.conn.ReceiveDatagram(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read datagrams: %w", explainConnError(err))
		}
		m, err := protocol.DecodeDatagram(b)
		if err != nil {
			return fmt.Errorf("%w: datagram: %w", errProtocol, err)
		}
		ack, ok := m.(*protocol.LeaseAck)
		if !ok {
			return fmt.Errorf("%w: unexpected %v in a datagram", errProtocol, m.Type())
		}
		s.onAck(ack)
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
