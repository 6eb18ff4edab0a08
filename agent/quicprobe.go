package agent

import (
	"context"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// movingToQUIC is the GoAway reason of a session on the fallback that
// ends because QUIC got through again.
const movingToQUIC = "moving to QUIC"

// quicBackError ends a session on the WebSocket fallback because QUIC
// connected again: the next session runs on conn at once.
type quicBackError struct{ next *dialed }

func (e *quicBackError) Error() string { return "QUIC gets through again: " + movingToQUIC }

// quicProbeLoop tries QUIC every QUICRetryInterval while the session runs
// on the fallback. When it connects, it returns a quicBackError holding
// the new connection; the session says GoAway and the agent welcomes
// itself on QUIC. It returns nil when ctx ends.
func (s *session) quicProbeLoop(ctx context.Context) error {
	a := s.agent
	ticker := a.clock.NewTicker(a.cfg.QUICRetryInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		conn, release, err := a.dialAny(ctx, transport.QUIC, a.tls, explainConnError, a.cfg.QUICFallbackAfter)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.cfg.metrics.quicProbes.WithLabelValues(probeFailed).Inc()
			s.log.Debug("QUIC still gets no answer: staying on the fallback", "err", err, "retryIn", a.cfg.QUICRetryInterval)
			continue
		}
		a.cfg.metrics.quicProbes.WithLabelValues(probeConnected).Inc()
		if ctx.Err() != nil { // the session ended meanwhile
			_ = conn.CloseWithError(protocol.CloseNormal, "not needed")
			release()
			return nil
		}
		s.log.Info("QUIC gets through again: moving the session to it")
		return &quicBackError{next: &dialed{conn: conn, release: release}}
	}
}
