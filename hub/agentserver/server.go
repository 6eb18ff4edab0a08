package agentserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/agentcert"
	"github.com/flotilla-io/flotilla/hub/dispatch"
	"github.com/flotilla-io/flotilla/hub/health"
	"github.com/flotilla-io/flotilla/hub/join"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// helloTimeout bounds how long a new connection may take to say hello.
const helloTimeout = 10 * time.Second

// agentServer terminates agent connections: it checks identity, answers
// hello, stamps lease renewals and passes status reports to the registry.
type agentServer struct {
	// backend is the registry, or the relay to the leader's.
	backend Backend
	// health are the thresholds the granted lease follows.
	health   health.Config
	dispatch *dispatch.Dispatcher
	joins    *join.Controller // join connections (protocol.JoinALPN)
	// handshakes bounds the handshakes in flight, QUIC and TLS on TCP
	// (Open's).
	handshakes *handshakeGate
	hubID      string
	clock      clock.PassiveClock
	logger     *slog.Logger
	nextID     atomic.Uint64

	mu       sync.Mutex
	sessions map[string]*agentSession // the live session of each cluster
	// greeting serialises the hand-over between sessions of one cluster,
	// so the registry always records the session that stays.
	greeting keyedMutex
	rejected atomic.Int64 // connections refused: identity, hello or frames
	replaced atomic.Int64 // sessions ended by a newer one of their cluster
	// renewalDatagrams counts the renewals that came as datagrams.
	renewalDatagrams atomic.Int64
	limits           sessionLimits
	// joinLimit bounds join attempts per source address.
	joinLimit joinLimiter
}

// agentSession is one live agent connection.
type agentSession struct {
	id      string
	seq     uint64 // orders the sessions this hub accepted: higher is newer
	cluster string
	remote  string
	serial  *big.Int // of the client certificate
	conn    transport.Conn
	writeMu sync.Mutex // serialises writes on the control stream
	control transport.Stream
	// statusStreamOpened, workStreamOpened: one of each per session.
	statusStreamOpened atomic.Bool
	workStreamOpened   atomic.Bool
	// renewing: a certificate renewal is in flight (one at a time).
	renewing atomic.Bool
	limits   sessionLimiters
	// renewMu serialises renewals from the control stream and datagrams.
	renewMu sync.Mutex
	// lastStamp is the hub time of the last renewal stamped, for the
	// acknowledgement of renewals beyond the session's rate.
	lastStamp time.Time
}

func newAgentServer(cfg Config, backend Backend, d *dispatch.Dispatcher, joins *join.Controller) *agentServer {
	return &agentServer{backend: backend, health: cfg.Health, dispatch: d, joins: joins, hubID: cfg.HubID, clock: cfg.Clock, logger: cfg.Logger, sessions: map[string]*agentSession{},
		limits: defaultSessionLimits(), handshakes: newHandshakeGate(cfg.Handshakes, cfg.Logger)}
}

// acceptor hands out agent connections: a QUIC listener's, or the
// WebSocket fallback's.
type acceptor interface {
	Accept(ctx context.Context) (transport.Conn, error)
}

// serve accepts connections until ctx ends, then says goodbye to every
// agent. It returns once all connection handlers have finished.
func (s *agentServer) serve(ctx context.Context, ln acceptor) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Error("agent listener stopped", "err", err)
			}
			return // each handler says goodbye to its agent when ctx ends
		}
		wg.Go(func() { s.handle(ctx, conn) })
	}
}

// revoke ends the session of cluster at once: its Cluster is deleted or
// being deleted, which revokes its certificates (a new session is refused
// by CheckCertificate).
func (s *agentServer) revoke(cluster, reason string) {
	if sess := s.session(cluster); sess != nil {
		s.logger.Info("agent session revoked", "cluster", cluster, "session", sess.id, "reason", reason)
		sess.goAway(reason)
	}
}

// supersede ends the session of c's cluster if its certificate c no longer
// allows (a newer join, certs issue or rotation in use), once the API
// server confirms it: the informer may deliver c after a session with a
// newer certificate was let in.
func (s *agentServer) supersede(ctx context.Context, c *v1alpha1.Cluster) {
	sess := s.session(c.Name)
	if sess == nil || agentcert.Allowed(c, sess.serial) == nil {
		return
	}
	go func() {
		// The API server's Cluster, not the registry's memory, which may
		// not have seen this change yet.
		err := s.backend.ConfirmCertificate(ctx, sess.cluster, sess.serial)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.logger.Info("agent session superseded", "cluster", sess.cluster, "session", sess.id, "reason", err)
		sess.goAway(err.Error())
	}()
}

// goAway tells the agent to reconnect later and closes its connection.
func (sess *agentSession) goAway(reason string) {
	_ = sess.write(&protocol.GoAway{Reason: reason})
	_ = sess.conn.CloseWithError(protocol.CloseGoingAway, reason)
}

// writeTimeout bounds a write on the control stream, so an agent that stops
// reading cannot hold the session's writer (or the hub's shutdown) forever.
const writeTimeout = 2 * time.Second

func (sess *agentSession) write(m protocol.Message) error {
	sess.writeMu.Lock()
	defer sess.writeMu.Unlock()
	_ = sess.control.SetWriteDeadline(time.Now().Add(writeTimeout))
	return protocol.WriteMessage(sess.control, m)
}

// handle runs one connection from handshake to close.
func (s *agentServer) handle(ctx context.Context, conn transport.Conn) {
	remote := conn.RemoteAddr().String()
	if conn.TLS().NegotiatedProtocol == protocol.JoinALPN {
		source := joinSource(conn.RemoteAddr())
		if ok, wait := s.joinLimit.allow(source, time.Now()); !ok {
			s.refuseJoin(ctx, conn, source, wait)
			return
		}
		s.joins.Serve(ctx, conn) // an agent without a certificate yet
		return
	}
	cluster, err := protocol.ClusterFromConnectionState(conn.TLS())
	var serial *big.Int
	if err == nil {
		serial = conn.TLS().VerifiedChains[0][0].SerialNumber
		err = s.backend.CheckCertificate(ctx, cluster, serial)
	}
	if err != nil {
		s.reject(conn, nil, remote, protocol.CloseUnauthorized, protocol.CodeUnauthorized, err)
		return
	}
	if err := s.backend.CertificateInUse(ctx, cluster, serial); err != nil {
		s.logger.Warn("cannot retire the certificate a rotation renewed", "cluster", cluster, "err", err)
	}
	sess, reader, err := s.greet(ctx, conn, cluster, serial, remote)
	if err != nil {
		return // greet rejected the connection and logged why
	}
	defer s.release(sess)
	// When the hub shuts down, even mid-greeting, the agent hears it.
	stopGoAway := context.AfterFunc(ctx, func() { sess.goAway("hub shutting down") })
	defer stopGoAway()

	sessionCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.acceptStreams(sessionCtx, sess) })
	if conn.Datagrams() {
		wg.Go(func() { s.datagramLoop(sessionCtx, sess, remote) })
	}

	reason := s.controlLoop(sess, reader, remote)
	// Whatever ended the control loop, the connection and its other
	// streams end with it.
	_ = conn.CloseWithError(protocol.CloseNormal, "session ended")
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		// The hub is stopping or leaving the lead: the agent reconnects,
		// to this hub restarted or to the new leader, and its Connect is
		// recorded there. A disconnect written and recorded per cluster
		// here would hold the stop up by a fleet's worth of writes.
		s.backend.DropSession(cluster, sess.id)
		s.logger.Debug("agent session closed for the shutdown", "cluster", cluster, "remote", remote)
		return
	}
	s.backend.Disconnect(cluster, sess.id, reason)
	s.logger.Info("agent disconnected", "cluster", cluster, "remote", remote, "reason", reason)
}

// greet reads the hello on the first stream, registers the session and
// answers welcome.
func (s *agentServer) greet(ctx context.Context, conn transport.Conn, cluster string, serial *big.Int, remote string) (*agentSession, *protocol.Reader, error) {
	helloCtx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	stream, err := conn.AcceptStream(helloCtx)
	if err != nil {
		s.reject(conn, nil, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, fmt.Errorf("no control stream: %w", err))
		return nil, nil, err
	}
	_ = stream.SetReadDeadline(time.Now().Add(helloTimeout)) // the network's clock, not an injected one
	kind, err := protocol.ReadStreamKind(stream)
	if err == nil && kind != protocol.StreamControl {
		err = fmt.Errorf("first stream is %v, want %v", kind, protocol.StreamControl)
	}
	if err != nil {
		s.reject(conn, stream, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
		return nil, nil, err
	}
	reader := protocol.NewAgentReader(stream)
	hello, err := readHello(reader, cluster)
	if err != nil {
		code := protocol.CodeBadMessage
		var peerErr *protocol.Error
		if errors.As(err, &peerErr) {
			code = peerErr.Code
		}
		s.reject(conn, stream, remote, protocol.CloseProtocolError, code, err)
		return nil, nil, err
	}
	_ = stream.SetReadDeadline(time.Time{})

	seq := s.nextID.Add(1)
	sess := &agentSession{id: fmt.Sprintf("%s/%d", s.hubID, seq), seq: seq, cluster: cluster, remote: remote, serial: serial, conn: conn, control: stream,
		limits: s.limits.forSession()}
	unlock := s.greeting.lock(cluster)
	older := s.claim(sess)
	err = s.backend.Connect(ctx, hello, sess.id, remote, string(conn.Kind()))
	if err != nil {
		// Under the greeting lock: a newer session of the cluster may not
		// claim in between, or the one given back would run unlisted.
		s.unclaim(sess, older)
	}
	unlock()
	if err != nil {
		s.reject(conn, stream, remote, protocol.CloseGoingAway, protocol.CodeBadMessage, fmt.Errorf("hub cannot register the cluster now: %w", err))
		return nil, nil, err
	}
	if older != nil {
		s.replace(older, sess)
	}
	leaseSeconds := health.GrantedLeaseSeconds(hello.LeaseDurationSeconds, s.health)
	welcome := &protocol.Welcome{
		ProtocolVersion: protocol.Version, HubID: s.hubID, HubTime: s.clock.Now(),
		LeaseDurationSeconds: leaseSeconds, RenewIntervalMillis: int64(leaseSeconds) * 1000 / 4,
	}
	if err := sess.write(welcome); err != nil {
		s.release(sess)
		s.backend.Disconnect(cluster, sess.id, "welcome not delivered")
		_ = conn.CloseWithError(protocol.CloseProtocolError, "welcome not delivered")
		return nil, nil, err
	}
	s.logger.Info("agent connected", "cluster", cluster, "remote", remote, "transport", conn.Kind(), "agentVersion", hello.AgentVersion, "session", sess.id)
	return sess, reader, nil
}

// readHello reads and checks the first message.
func readHello(reader *protocol.Reader, cluster string) (*protocol.Hello, error) {
	msg, err := reader.ReadMessage()
	if err != nil {
		return nil, fmt.Errorf("read hello: %w", err)
	}
	hello, ok := msg.(*protocol.Hello)
	switch {
	case !ok:
		return nil, &protocol.Error{Code: protocol.CodeBadMessage, Message: fmt.Sprintf("expected Hello, got %v", msg.Type())}
	case hello.ProtocolVersion != protocol.Version:
		return nil, &protocol.Error{Code: protocol.CodeUnsupportedVersion,
			Message: fmt.Sprintf("hub speaks protocol version %d, agent sent version %d", protocol.Version, hello.ProtocolVersion)}
	case hello.ClusterName != cluster:
		return nil, &protocol.Error{Code: protocol.CodeClusterMismatch,
			Message: fmt.Sprintf("certificate is for cluster %q, hello names %q", cluster, hello.ClusterName)}
	}
	return hello, nil
}

// reject tells the peer why (as an Error message if there is a stream to
// send it on), closes the connection and logs.
func (s *agentServer) reject(conn transport.Conn, stream transport.Stream, remote string, closeCode quic.ApplicationErrorCode, code string, cause error) {
	s.rejected.Add(1)
	message := cause.Error()
	var peerErr *protocol.Error
	if errors.As(cause, &peerErr) {
		message = peerErr.Message
	}
	if stream != nil {
		_ = protocol.WriteMessage(stream, &protocol.Error{Code: code, Message: truncate(message, 1024)})
	}
	_ = conn.CloseWithError(closeCode, truncate(code+": "+message, 256))
	s.logger.Warn("agent connection rejected", "remote", remote, "code", code, "err", message)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// controlLoop serves the control stream until the agent leaves or breaks
// the protocol, and returns why it ended.
func (s *agentServer) controlLoop(sess *agentSession, reader *protocol.Reader, remote string) string {
	for {
		msg, err := reader.ReadMessage()
		if err != nil {
			return s.endOnReadError(sess, remote, err)
		}
		switch m := msg.(type) {
		case *protocol.LeaseRenew:
			hubTime, err := s.renewLease(sess, remote, m)
			if err != nil {
				s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
				return err.Error()
			}
			if err := sess.write(&protocol.LeaseAck{Seq: m.Seq, HubTime: hubTime}); err != nil {
				return "ack not delivered: " + err.Error()
			}
		case *protocol.GoAway:
			_ = sess.conn.CloseWithError(protocol.CloseNormal, "goodbye")
			return "agent said goodbye: " + m.Reason
		case *protocol.Error:
			_ = sess.conn.CloseWithError(protocol.CloseNormal, "peer error")
			return "agent reported an error: " + m.Error()
		default:
			err := fmt.Errorf("unexpected %v on the control stream", msg.Type())
			s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
			return err.Error()
		}
	}
}

// renewLease stamps a renewal, unless the session renews faster than its
// rate: then the renewal is acknowledged with the last stamp (a moment
// ago) and counted, and the registry does no work for it.
func (s *agentServer) renewLease(sess *agentSession, remote string, m *protocol.LeaseRenew) (time.Time, error) {
	sess.renewMu.Lock()
	defer sess.renewMu.Unlock()
	if !sess.lastStamp.IsZero() && !sess.limits.renewals.Allow() {
		s.limits.limitedRenewals.Add(1)
		return sess.lastStamp, nil
	}
	hubTime, err := s.backend.Renew(sess.cluster, remote, m.AgentTime)
	if err == nil {
		sess.lastStamp = hubTime
	}
	return hubTime, err
}

// endOnReadError closes the connection after a failed read: politely for a
// protocol violation, silently for a connection that is already gone.
func (s *agentServer) endOnReadError(sess *agentSession, remote string, err error) string {
	var appErr *quic.ApplicationError
	var idleErr *quic.IdleTimeoutError
	var closedErr *transport.ClosedError
	switch {
	case errors.Is(err, io.EOF), errors.As(err, &appErr), errors.As(err, &idleErr), errors.As(err, &closedErr):
		_ = sess.conn.CloseWithError(protocol.CloseNormal, "stream closed")
		return "connection closed: " + err.Error()
	case errors.Is(err, protocol.ErrFrameTooLarge), errors.Is(err, protocol.ErrBadPayload),
		errors.Is(err, protocol.ErrInvalidMessage), errors.Is(err, protocol.ErrUnknownMessageType), errors.Is(err, protocol.ErrEmptyFrame):
		s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
		return "protocol violation: " + err.Error()
	default:
		_ = sess.conn.CloseWithError(protocol.CloseProtocolError, "read failed")
		return "read failed: " + err.Error()
	}
}

// maxSessionStreams bounds the streams of one session served at once
// (control aside): QUIC's own limit (MaxIncomingStreams) enforces it on
// QUIC; the WebSocket's multiplexer has none, so an agent beyond it there
// breaks the protocol.
const maxSessionStreams = 7

// acceptStreams serves the streams the agent opens after hello: status
// streams now, Work streams later.
func (s *agentServer) acceptStreams(ctx context.Context, sess *agentSession) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxSessionStreams)
	for {
		stream, err := sess.conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			s.reject(sess.conn, sess.control, sess.remote, protocol.CloseProtocolError, protocol.CodeBadMessage,
				fmt.Errorf("more than %d streams open at once", maxSessionStreams))
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			s.serveStream(ctx, sess, stream)
		})
	}
}

// serveStream serves one stream the agent opened: its status reports or
// its Works.
func (s *agentServer) serveStream(ctx context.Context, sess *agentSession, stream transport.Stream) {
	remote := sess.conn.RemoteAddr().String()
	kind, err := protocol.ReadStreamKind(stream)
	switch {
	case err != nil:
	case kind == protocol.StreamStatus && !sess.statusStreamOpened.CompareAndSwap(false, true):
		err = errors.New("a second status stream") // bounds what one agent can make the hub buffer
	case kind == protocol.StreamWork && !sess.workStreamOpened.CompareAndSwap(false, true):
		err = errors.New("a second work stream")
	case kind != protocol.StreamStatus && kind != protocol.StreamWork && kind != protocol.StreamRenew:
		err = fmt.Errorf("unexpected %v stream", kind)
	}
	if err != nil {
		s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
		return
	}
	if kind == protocol.StreamRenew {
		s.serveRenew(ctx, sess, stream) // renew.go
		return
	}
	if kind == protocol.StreamWork {
		s.serveWorkStream(ctx, sess, stream)
		return
	}
	reports := newReportPacer(sess.limits.reports, func(report *protocol.ClusterStatus) {
		if err := s.backend.Status(sess.cluster, report); err != nil {
			s.logger.Warn("cluster status rejected", "cluster", sess.cluster, "err", err)
		}
	})
	defer reports.stop()
	reader := protocol.NewAgentReader(stream)
	for {
		msg, err := reader.ReadMessage()
		if err != nil {
			if !errors.Is(err, io.EOF) && sess.conn.Context().Err() == nil {
				s.endOnReadError(sess, remote, err)
			}
			return
		}
		report, ok := msg.(*protocol.ClusterStatus)
		if !ok {
			s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, fmt.Errorf("unexpected %v on the status stream", msg.Type()))
			return
		}
		if reports.put(report) {
			s.limits.coalescedReports.Add(1)
		}
	}
}

// serveWorkStream hands the work stream to the dispatcher; when it fails,
// the session ends, so the agent reconnects and resyncs.
func (s *agentServer) serveWorkStream(ctx context.Context, sess *agentSession, stream transport.Stream) {
	err := s.dispatch.Serve(ctx, sess.cluster, sess.seq, stream)
	if err == nil || sess.conn.Context().Err() != nil {
		return
	}
	remote := sess.conn.RemoteAddr().String()
	if errors.Is(err, protocol.ErrInvalidMessage) || errors.Is(err, protocol.ErrUnknownMessageType) || errors.Is(err, protocol.ErrBadPayload) || errors.Is(err, protocol.ErrFrameTooLarge) {
		s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
		return
	}
	s.logger.Warn("work stream ended", "cluster", sess.cluster, "err", err)
	_ = sess.conn.CloseWithError(protocol.CloseNormal, "work stream ended")
}
