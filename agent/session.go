package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/internal/ellipsis"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

const (
	// welcomeTimeout bounds the wait for the hub's answer to Hello.
	welcomeTimeout = 10 * time.Second
	// writeTimeout bounds one frame write, so a hub that stops reading ends
	// the session instead of stalling it.
	writeTimeout = 10 * time.Second
	// goodbyeTimeout bounds the write of a final GoAway or Error.
	goodbyeTimeout = time.Second
	// goAwayLinger is how long the agent waits for the hub to close after
	// GoAway: closing at once would drop a GoAway still in flight.
	goAwayLinger   = time.Second
	shutdownReason = "agent shutting down"
)

// session is one connection to the hub.
type session struct {
	agent *Agent
	conn  transport.Conn
	log   *slog.Logger

	controlMu sync.Mutex // serialises writes on control
	control   transport.Stream
	reader    *protocol.Reader // read only by the handshake, then readControl
	pending   pendingRenewals
	// renewEvery is the renew interval of the welcomed session.
	renewEvery time.Duration
	// datagrams: the hub takes renewals as QUIC datagrams.
	datagrams bool
	// otherHubs: --hub lists other replicas to move to when this one
	// goes silent.
	otherHubs bool
}

// dialed is a connection made before its session: a QUIC connection a
// session on the fallback found (see quicProbeLoop).
type dialed struct {
	conn    transport.Conn
	release func()
}

// runSession serves one session until it ends, on pre if not nil, else on
// a new connection. welcomedAt is when the hub welcomed it, zero if it
// never did.
func (a *Agent) runSession(ctx context.Context, pre *dialed) (welcomedAt time.Time, err error) {
	if pre == nil {
		conn, release, err := a.dialHub(ctx)
		if err != nil {
			return time.Time{}, err
		}
		pre = &dialed{conn: conn, release: release}
	}
	conn := pre.conn
	// Every path below closes conn (abort, goAway) before release runs.
	defer pre.release()
	s := &session{agent: a, conn: conn, log: a.log.With("hub", conn.RemoteAddr().String(), "transport", conn.Kind()),
		otherHubs: len(splitHubs(a.cfg.Hub)) > 1}
	welcome, err := s.handshake(ctx)
	if err != nil {
		s.abort(err)
		return time.Time{}, err
	}
	welcomedAt = a.clock.Now()
	s.log.Info("connected", "hubID", welcome.HubID, "leaseDuration", time.Duration(welcome.LeaseDurationSeconds)*time.Second,
		"renewInterval", time.Duration(welcome.RenewIntervalMillis)*time.Millisecond)
	a.stats.update(func(st *Stats) { // measurements stay until new acks replace them
		st.Connected, st.HubID, st.ConnectedSince = true, welcome.HubID, welcomedAt
	})
	defer a.stats.update(func(st *Stats) { st.Connected = false })
	a.cfg.metrics.sessionStarted(conn.Kind())
	err = s.serve(ctx, welcome)
	a.cfg.metrics.sessionEnded(err)
	return welcomedAt, err
}

// handshake opens the control stream, sends Hello and waits for Welcome.
func (s *session) handshake(ctx context.Context) (*protocol.Welcome, error) {
	// Before Welcome the hub holds no lease for this agent: on shutdown,
	// just close.
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		s.conn.CloseWithError(protocol.CloseNormal, shutdownReason)
	})
	defer func() {
		if !stop() {
			<-closed // no goroutine outlives the session
		}
	}()
	str, err := s.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("open control stream: %w", explainConnError(err))
	}
	s.control, s.reader = str, protocol.NewReader(str, 0)
	if err := protocol.WriteStreamKind(str, protocol.StreamControl); err != nil {
		return nil, explainConnError(err)
	}
	hello := &protocol.Hello{
		ProtocolVersion:      protocol.Version,
		ClusterName:          s.agent.cfg.ClusterName,
		AgentVersion:         s.agent.cfg.Version,
		LeaseDurationSeconds: s.agent.cfg.leaseSeconds(),
	}
	if err := s.writeControl(hello, writeTimeout); err != nil {
		return nil, fmt.Errorf("send Hello: %w", explainConnError(err))
	}
	return s.awaitWelcome()
}

// awaitWelcome reads the hub's answer to Hello.
func (s *session) awaitWelcome() (*protocol.Welcome, error) {
	if err := s.control.SetReadDeadline(time.Now().Add(welcomeTimeout)); err != nil {
		return nil, fmt.Errorf("set read deadline: %w", err)
	}
	m, err := s.reader.ReadMessage()
	if err != nil {
		var ne net.Error
		switch {
		case malformed(err):
			return nil, fmt.Errorf("%w: answer to Hello: %w", errProtocol, err)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, fmt.Errorf("no Welcome from the hub within %v: %w", welcomeTimeout, explainConnError(err))
		}
		return nil, fmt.Errorf("wait for Welcome: %w", explainConnError(err))
	}
	if err := s.control.SetReadDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear read deadline: %w", err)
	}
	switch m := m.(type) {
	case *protocol.Welcome:
		if m.ProtocolVersion != protocol.Version {
			return nil, fmt.Errorf("%w: hub welcomed protocol version %d, this agent speaks %d",
				errProtocol, m.ProtocolVersion, protocol.Version)
		}
		return m, nil
	case *protocol.Error:
		return nil, fmt.Errorf("hub refused the session: %w", m)
	case *protocol.GoAway:
		return nil, &goAwayError{reason: m.Reason}
	}
	return nil, fmt.Errorf("%w: hub answered Hello with %v, want Welcome", errProtocol, m.Type())
}

// serve runs the welcomed session: renewals and their acks on the control
// stream, reports on the status stream, Works on the work stream. It
// returns nil when ctx ends, after saying GoAway, or the error that ended
// the session.
func (s *session) serve(ctx context.Context, welcome *protocol.Welcome) error {
	// The loops get a context of their own, so that when ctx ends they stop
	// only once this function is ready to say goodbye.
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	// Set before the reader starts: onAck reads it.
	s.renewEvery = renewInterval(welcome, s.agent.cfg.LeaseDuration)
	// The welcome is an answer from the hub: fencing counts from here.
	s.agent.works.Contact(s.agent.clock.Now(), s.renewEvery)
	s.datagrams = s.conn.Datagrams()
	errc := make(chan error, 6) // one per goroutine: none blocks on it
	readerDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(readerDone)
		errc <- s.readControl()
	})
	ackTimeout := time.Duration(welcome.LeaseDurationSeconds) * time.Second
	wg.Go(func() { errc <- s.renewLoop(loopCtx, s.renewEvery, ackTimeout) })
	wg.Go(func() { errc <- s.statusLoop(loopCtx) })
	wg.Go(func() { errc <- s.workLoop(loopCtx) })
	wg.Go(func() { errc <- s.rotateLoop(loopCtx) })
	if s.datagrams {
		wg.Go(func() { errc <- s.readDatagrams(loopCtx) })
	}
	if s.conn.Kind() != transport.QUIC && s.agent.cfg.Transport == TransportAuto {
		wg.Go(func() { errc <- s.quicProbeLoop(loopCtx) })
	}

	var err error
	var back *quicBackError
	select {
	case <-ctx.Done():
		stopLoops()
		s.goAway(readerDone, shutdownReason)
	case err = <-errc:
		stopLoops()
		if errors.As(err, &back) {
			s.goAway(readerDone, movingToQUIC)
		} else {
			s.abort(err)
		}
	}
	wg.Wait()
	return err
}

// goAway tells the hub the agent is leaving, for reason, and closes the
// connection.
func (s *session) goAway(readerDone <-chan struct{}, reason string) {
	err := s.closeControl(&protocol.GoAway{Reason: reason})
	if err != nil {
		s.log.Debug("cannot send GoAway", "err", err)
	} else {
		// A network wait, like the deadlines: real time, not the agent's clock.
		t := time.NewTimer(goAwayLinger)
		select {
		case <-readerDone: // the hub closed after reading GoAway
		case <-t.C:
		}
		t.Stop()
	}
	s.conn.CloseWithError(protocol.CloseNormal, reason)
	s.log.Info("disconnected from the hub", "reason", reason)
}

// abort closes the connection after err ended the session, first telling a
// hub that broke the protocol what was wrong.
func (s *session) abort(err error) {
	code, reason := protocol.CloseNormal, "session ended"
	if errors.Is(err, errRotated) {
		reason = "certificate renewed: reconnecting"
	}
	if errors.Is(err, errProtocol) {
		code, reason = protocol.CloseProtocolError, ellipsis.Cut(err.Error(), 512)
		if werr := s.closeControl(&protocol.Error{Code: protocol.CodeBadMessage, Message: reason}); werr != nil {
			s.log.Debug("cannot send Error to the hub", "err", werr)
		}
	}
	s.conn.CloseWithError(code, reason)
}

// closeControl sends a last message and ends the agent's side of the
// control stream.
func (s *session) closeControl(m protocol.Message) error {
	if s.control == nil {
		return errors.New("no control stream")
	}
	s.controlMu.Lock()
	defer s.controlMu.Unlock()
	if err := writeFrame(s.control, m, goodbyeTimeout); err != nil {
		return err
	}
	return s.control.Close()
}

// writeControl writes one message on the control stream.
func (s *session) writeControl(m protocol.Message, timeout time.Duration) error {
	s.controlMu.Lock()
	defer s.controlMu.Unlock()
	return writeFrame(s.control, m, timeout)
}

// writeFrame writes m on str, giving up after timeout.
func writeFrame(str transport.Stream, m protocol.Message, timeout time.Duration) error {
	if err := str.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("set write deadline: %w", err)
	}
	return protocol.WriteMessage(str, m)
}
