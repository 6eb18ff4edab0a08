package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
)

// hubEvent is one thing the test hub saw, in the order it saw them.
type hubEvent struct {
	kind  string // "hello", "renew", "status", "work", "goaway", "closed" or "join"
	conn  int    // connection number, from 1
	hello *protocol.Hello
	peer  string // with hello: the cluster the client certificate proves
	join  *protocol.JoinRequest
	// renewal: with kind "renewal", a certificate renewal request.
	renewal *protocol.CertificateRenewRequest
	renew   *protocol.LeaseRenew
	// datagram: with kind "renew", the renewal came as a datagram.
	datagram bool
	status   *protocol.ClusterStatus
	work     protocol.Message // a message on the work stream
	goAway   *protocol.GoAway
}

// testHub is a minimal hub: it answers Hello (with Welcome unless answer
// says otherwise), acks renewals, closes the connection after an agent's
// GoAway, and records everything on events.
type testHub struct {
	ln     *quic.Listener
	answer func(*protocol.Hello) protocol.Message
	events chan hubEvent
	conns  chan *hubConn // every welcomed connection

	// muteAcks makes the hub stop acknowledging renewals, like a wedged hub.
	muteAcks atomic.Bool
	// noDatagrams makes the hub a peer without QUIC datagrams: renewals
	// come on the control stream.
	noDatagrams bool
	// admit, if set, is the listener's quic.Transport ConnContext: it may
	// refuse a connection at its first packet, as a busy hub does.
	admit func(context.Context, *quic.ClientInfo) (context.Context, error)

	// join answers the nth join request (from 1); nil refuses join streams.
	join  func(n int, req *protocol.JoinRequest) protocol.Message
	joins atomic.Int32
	// renew answers the nth certificate renewal (from 1); nil refuses renew
	// streams.
	renew  func(n int, req *protocol.CertificateRenewRequest) protocol.Message
	renews atomic.Int32

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   []*quic.Conn
}

// hubConn lets a test act on one connection.
type hubConn struct {
	id      int
	conn    *quic.Conn
	mu      sync.Mutex // serialises writes on control
	control *quic.Stream

	workMu sync.Mutex // serialises writes on work
	work   *quic.Stream
}

// send writes m on the connection's control stream.
func (c *hubConn) send(m protocol.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return protocol.WriteMessage(c.control, m)
}

// sendWork writes m on the connection's work stream, which the agent must
// have opened (wait for its inventory first).
func (c *hubConn) sendWork(m protocol.Message) error {
	c.workMu.Lock()
	defer c.workMu.Unlock()
	if c.work == nil {
		return errors.New("the agent has not opened a work stream")
	}
	return protocol.WriteMessage(c.work, m)
}

// testWelcome welcomes with a short renew interval.
func testWelcome(*protocol.Hello) protocol.Message {
	return &protocol.Welcome{ProtocolVersion: protocol.Version, HubID: "test-hub", HubTime: time.Now(),
		LeaseDurationSeconds: 40, RenewIntervalMillis: 200}
}

// startTestHub listens on a loopback port until the test ends. answer nil
// means testWelcome; options adjust the hub before it starts.
func startTestHub(t *testing.T, tlsConf *tls.Config, answer func(*protocol.Hello) protocol.Message, options ...func(*testHub)) *testHub {
	t.Helper()
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	if answer == nil {
		answer = testWelcome
	}
	h := &testHub{answer: answer, events: make(chan hubEvent, 4096), conns: make(chan *hubConn, 16)}
	for _, o := range options {
		o(h)
	}
	config := protocol.QUICConfig()
	config.EnableDatagrams = !h.noDatagrams
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("test hub: listen: %v", err)
	}
	tr := &quic.Transport{Conn: udp, ConnContext: h.admit}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	ln, err := tr.Listen(tlsConf, config)
	if err != nil {
		t.Fatalf("test hub: listen: %v", err)
	}
	h.ln = ln
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.wg.Go(h.acceptLoop)
	t.Cleanup(h.close)
	return h
}

func (h *testHub) addr() string { return h.ln.Addr().String() }

func (h *testHub) close() {
	h.cancel()
	h.ln.Close()
	h.mu.Lock()
	for _, c := range h.open {
		c.CloseWithError(0, "test hub closing")
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// record queues an event; a test that stopped reading loses events rather
// than blocking the hub.
func (h *testHub) record(e hubEvent) {
	select {
	case h.events <- e:
	default:
	}
}

func (h *testHub) acceptLoop() {
	for id := 1; ; id++ {
		conn, err := h.ln.Accept(h.ctx)
		if err != nil {
			return
		}
		h.mu.Lock()
		h.open = append(h.open, conn)
		h.mu.Unlock()
		h.wg.Go(func() {
			<-conn.Context().Done()
			h.record(hubEvent{kind: "closed", conn: id})
		})
		c := &hubConn{id: id, conn: conn}
		h.wg.Go(func() { h.serveConn(c) })
		if conn.ConnectionState().SupportsDatagrams.Remote && !h.noDatagrams {
			h.wg.Go(func() { h.serveDatagrams(c) })
		}
	}
}

// serveDatagrams acks the renewals that come as datagrams.
func (h *testHub) serveDatagrams(c *hubConn) {
	for {
		b, err := c.conn.ReceiveDatagram(h.ctx)
		if err != nil {
			return
		}
		m, err := protocol.DecodeDatagram(b)
		renew, ok := m.(*protocol.LeaseRenew)
		if err != nil || !ok {
			c.conn.CloseWithError(1, "bad datagram")
			return
		}
		h.record(hubEvent{kind: "renew", conn: c.id, renew: renew, datagram: true})
		if h.muteAcks.Load() {
			continue
		}
		if protocol.SendDatagram(c.conn, &protocol.LeaseAck{Seq: renew.Seq, HubTime: time.Now()}) != nil {
			return
		}
	}
}

// serveConn dispatches the agent's streams by kind.
func (h *testHub) serveConn(c *hubConn) {
	for {
		str, err := c.conn.AcceptStream(h.ctx)
		if err != nil {
			return
		}
		kind, err := protocol.ReadStreamKind(str)
		if err != nil {
			c.conn.CloseWithError(1, err.Error())
			return
		}
		switch kind {
		case protocol.StreamControl:
			h.wg.Go(func() { h.serveControl(c, str) })
		case protocol.StreamStatus:
			h.wg.Go(func() { h.serveStatus(c, str) })
		case protocol.StreamWork:
			h.wg.Go(func() { h.serveWork(c, str) })
		case protocol.StreamJoin:
			h.wg.Go(func() { h.serveJoin(c, str) })
		case protocol.StreamRenew:
			h.wg.Go(func() { h.serveRenew(c, str) })
		}
	}
}

func (h *testHub) serveControl(c *hubConn, str *quic.Stream) {
	r := protocol.NewReader(str, 0)
	m, err := r.ReadMessage()
	hello, ok := m.(*protocol.Hello)
	if err != nil || !ok {
		c.conn.CloseWithError(1, "want Hello")
		return
	}
	peer, _ := protocol.ClusterFromConnectionState(c.conn.ConnectionState().TLS)
	h.record(hubEvent{kind: "hello", conn: c.id, hello: hello, peer: peer})
	c.mu.Lock()
	c.control = str
	c.mu.Unlock()
	answer := h.answer(hello)
	if c.send(answer) != nil {
		return
	}
	if _, ok := answer.(*protocol.Welcome); ok {
		select {
		case h.conns <- c:
		case <-h.ctx.Done():
			return
		}
	}
	h.readControl(c, r)
}

// readControl acks renewals until the agent says GoAway or the stream ends.
func (h *testHub) readControl(c *hubConn, r *protocol.Reader) {
	for {
		m, err := r.ReadMessage()
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *protocol.LeaseRenew:
			h.record(hubEvent{kind: "renew", conn: c.id, renew: m})
			if h.muteAcks.Load() {
				continue
			}
			if c.send(&protocol.LeaseAck{Seq: m.Seq, HubTime: time.Now()}) != nil {
				return
			}
		case *protocol.GoAway:
			h.record(hubEvent{kind: "goaway", conn: c.id, goAway: m})
			c.conn.CloseWithError(0, "goodbye")
			return
		}
	}
}

func (h *testHub) serveStatus(c *hubConn, str *quic.Stream) {
	r := protocol.NewReader(str, 0)
	for {
		m, err := r.ReadMessage()
		if err != nil {
			return
		}
		if s, ok := m.(*protocol.ClusterStatus); ok {
			h.record(hubEvent{kind: "status", conn: c.id, status: s})
		}
	}
}

// serveWork records the agent's messages on the work stream.
func (h *testHub) serveWork(c *hubConn, str *quic.Stream) {
	c.workMu.Lock()
	c.work = str
	c.workMu.Unlock()
	r := protocol.NewReader(str, protocol.MaxWorkFrameSize)
	for {
		m, err := r.ReadMessage()
		if err != nil {
			return
		}
		h.record(hubEvent{kind: "work", conn: c.id, work: m})
	}
}

// waitWork returns the next message of type T on connection conn's work
// stream that satisfies match (nil matches any), discarding other events.
func waitWork[T protocol.Message](t *testing.T, h *testHub, conn int, what string, timeout time.Duration, match func(T) bool) T {
	t.Helper()
	e := h.waitFor(t, what, timeout, func(e hubEvent) bool {
		m, ok := e.work.(T)
		return e.kind == "work" && e.conn == conn && ok && (match == nil || match(m))
	})
	return e.work.(T)
}

// waitFor returns the first event that matches, discarding the others.
func (h *testHub) waitFor(t *testing.T, what string, timeout time.Duration, match func(hubEvent) bool) hubEvent {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case e := <-h.events:
			if match(e) {
				return e
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// waitNewConn waits for the Hello of a connection after first and returns
// it, without skipping the events that follow the Hello (the work
// inventory may come before the first renewal).
func (h *testHub) waitNewConn(t *testing.T, first *hubConn, why string) *hubConn {
	t.Helper()
	h.waitFor(t, "a new Hello after "+why, waitTimeout, func(e hubEvent) bool {
		return e.kind == "hello" && e.conn > first.id
	})
	return h.waitConn(t, waitTimeout)
}

// waitConn returns the next welcomed connection.
func (h *testHub) waitConn(t *testing.T, timeout time.Duration) *hubConn {
	t.Helper()
	select {
	case c := <-h.conns:
		return c
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for a welcomed connection", timeout)
		return nil
	}
}

func isKind(kind string) func(hubEvent) bool {
	return func(e hubEvent) bool { return e.kind == kind }
}

// waitReconnect waits for the agent's next connection after first: its
// Hello, then a renewal on it (which shows the agent read the Welcome).
func (h *testHub) waitReconnect(t *testing.T, first *hubConn, why string) *hubConn {
	t.Helper()
	next := h.waitNewConn(t, first, why)
	h.waitFor(t, "a renewal on the new connection", waitTimeout, func(e hubEvent) bool {
		return e.kind == "renew" && e.conn == next.id
	})
	return next
}
