package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/quicflood"
)

// floodInitials is the handshake-flood attack: single QUIC Initial
// packets from as many source addresses, never followed up.
const floodInitials = 300

// TestInitialFloodLocksNobodyOut: 300 QUIC Initial packets from 300
// addresses (127/8 ones standing for spoofed sources) that never answer
// do not keep agents out: an agent's handshake right after the flood gets
// in (at most 2 s of refusals), an agent restarted during a flood
// reconnects, and the running agent's cluster stays Ready throughout.
// Before (main at b3c670f): the flood filled --max-handshakes, honest
// handshakes were refused for about 10 s and a restarted agent's cluster
// went Unknown.
func TestInitialFloodLocksNobodyOut(t *testing.T) {
	f := startFleet(t, 1)
	h := f.hub
	probeTLS := loadClientTLS(t, h.issueCert(t, "probe"), "127.0.0.1")
	ready := watchReady(t, h, "member-1")

	t.Run("handshakes right after the flood get in", func(t *testing.T) {
		sent := sendInitials(t, h, 0)
		refusedFor, refusals := dialUntilAdmitted(t, h.quicAddr, probeTLS)
		t.Logf("after %d Initials sent in %v: refused %d times, the first handshake completed %v after the flood; %s", floodInitials, sent.Round(time.Millisecond),
			refusals, refusedFor.Round(time.Millisecond), grepMetrics(h.metrics(t), "flotilla_quic_retries_total", "flotilla_quic_handshakes_refused_total", "flotilla_agent_handshakes_in_flight"))
		if refusedFor > 2*time.Second {
			t.Errorf("honest handshakes were refused for %v after the flood, want at most 2 s", refusedFor)
		}
	})

	t.Run("an agent restarted during a flood reconnects", func(t *testing.T) {
		a := f.agents["member-1"]
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "member-1's session ended", func() (bool, string) {
			m := h.metrics(t)
			return strings.Contains(m, "flotilla_connected_agents 0\n"), grepMetrics(m, "flotilla_connected_agents")
		})
		sendInitials(t, h, 1)
		started := time.Now()
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "member-1's agent connected again", func() (bool, string) {
			m := h.metrics(t)
			return strings.Contains(m, "flotilla_connected_agents 1\n"), grepMetrics(m, "flotilla_connected_agents")
		})
		t.Logf("the agent restarted right after the flood connected %v after its start; %s", time.Since(started).Round(time.Millisecond),
			grepMetrics(h.metrics(t), "flotilla_quic_retries_total", "flotilla_quic_handshakes_refused_total", "flotilla_quic_handshakes_abandoned_total"))
	})

	// The flood's handshakes time out: twice --quic-handshake-timeout
	// (5 s) at most.
	waitFor(t, 15*time.Second, "the flood's handshakes dropped", func() (bool, string) {
		m := h.metrics(t)
		return strings.Contains(m, "flotilla_agent_handshakes_in_flight 0\n"), grepMetrics(m, "flotilla_agent_handshakes_in_flight")
	})
	t.Logf("after: %s", grepMetrics(h.metrics(t), "flotilla_quic_handshakes_abandoned_total", "flotilla_quic_retries_total"))
	if notReady := ready(); len(notReady) > 0 {
		t.Errorf("member-1 was seen not Ready %d times during the floods, first %s, last %s", len(notReady), notReady[0], notReady[len(notReady)-1])
	}
}

// sendInitials sends the flood, the n-th one of the test from its own
// addresses, and returns how long sending took.
func sendInitials(t *testing.T, h *hub, n int) time.Duration {
	t.Helper()
	spoofed := func(i int) net.IP { return loopbackIP(10+n, i) }
	took, err := quicflood.Send(t.Context(), h.quicAddr, floodInitials, spoofed, protocol.ALPN)
	if err != nil {
		t.Fatalf("send %d Initials: %v", floodInitials, err)
	}
	return took
}

// loopbackIP is the i-th address of a block of 127/8 (any of them reaches
// the loopback interface): a source address of its own for each peer.
func loopbackIP(block, i int) net.IP {
	return net.IPv4(127, byte(block), byte(i/250), byte(1+i%250))
}

// dialUntilAdmitted completes QUIC handshakes with the hub as an agent
// would, every 100 ms until one is let in (at most 30 s), and returns how
// long that took and how many attempts failed before.
func dialUntilAdmitted(t *testing.T, addr string, tlsConf *tls.Config) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for refusals := 0; ; refusals++ {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		conn, err := quic.DialAddr(ctx, addr, tlsConf, protocol.QUICConfig())
		cancel()
		if err == nil {
			_ = conn.CloseWithError(0, "probe done")
			return time.Since(start), refusals
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no handshake let in for 30 s after the flood: %v", err)
		}
		<-ticker.C // paces the attempts, as an agent's backoff would
	}
}

// watchReady polls cluster's Ready condition every 200 ms until the test
// ends or the returned function is called, which says when it was seen
// otherwise.
func watchReady(t *testing.T, h *hub, cluster string) func() []string {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		for {
			if c := h.cluster(t, cluster); readyOf(c) != metav1.ConditionTrue {
				mu.Lock()
				seen = append(seen, time.Now().Format("15:04:05.000")+" "+describe(c))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	var once sync.Once
	result := func() []string {
		once.Do(func() { stop(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	t.Cleanup(func() { result() })
	return result
}

// idleGroup is one kind of connection an attacker opens and leaves idle.
type idleGroup struct {
	name  string
	n     int
	open  func(i int) (net.Conn, error)
	conns []*idleConn
}

// idleConn is a connection the test holds, read until the hub closes it.
type idleConn struct {
	closed atomic.Bool
}

// TestIdleConnectionsAreClosed: connections that never authenticate go
// within the configured timeouts: 300 TLS connections to the WebSocket
// fallback without a client certificate, one GET / each, then idle; 100
// TCP connections to it that never send a ClientHello; 300 TCP
// connections to the HTTP port, half after a request, half silent. The
// test runs with short timeouts (TestConnLimitDefaults checks that the
// defaults close them all within 60 s too). Before (main at b3c670f): the
// 300 idle TLS connections and the 150 idle HTTP ones were all still open
// after 60 s, and the hub held a file descriptor for each.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const headerTimeout, idleTimeout = 2 * time.Second, 3 * time.Second
	wsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t, freeport.TCP))
	h := startHub(t, "--websocket-addr="+wsAddr, "--tcp-read-header-timeout="+headerTimeout.String(), "--tcp-idle-timeout="+idleTimeout.String())
	baseFDs := openFiles(t, h.Pid())

	groups := []*idleGroup{
		{name: "TCP to the WebSocket port, no ClientHello", n: 100, open: func(i int) (net.Conn, error) {
			return dialFrom(loopbackIP(20, i), wsAddr)
		}},
		{name: "TLS to the WebSocket port, GET / then idle", n: 300, open: func(i int) (net.Conn, error) {
			return tlsRequestFrom(loopbackIP(21, i), wsAddr, "/")
		}},
		{name: "TCP to the HTTP port, GET /healthz then idle", n: 150, open: func(i int) (net.Conn, error) {
			return requestFrom(loopbackIP(22, i), h.httpAddr, "/healthz")
		}},
		{name: "TCP to the HTTP port, silent", n: 150, open: func(i int) (net.Conn, error) {
			return dialFrom(loopbackIP(23, i), h.httpAddr)
		}},
	}
	opened := time.Now()
	for _, g := range groups {
		g.openAll(t)
	}
	total := 0
	for _, g := range groups {
		total += g.n
	}
	t.Logf("opened %d idle connections in %v (%d still open); the hub holds %d more file descriptors", total, time.Since(opened).Round(time.Millisecond),
		countOpen(groups), openFiles(t, h.Pid())-baseFDs)

	// Polls the connections' state (their readers note the close) for up
	// to 60 s after they opened.
	deadline := opened.Add(60 * time.Second)
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for countOpen(groups) > 0 && time.Now().Before(deadline) {
		<-ticker.C
	}
	allClosed := time.Since(opened)
	for _, g := range groups {
		left := g.left()
		t.Logf("after: %s: %d of %d still open %v after they opened", g.name, left, g.n, allClosed.Round(100*time.Millisecond))
		if left > 0 {
			t.Errorf("%s: %d of %d still open after 60 s", g.name, left, g.n)
		}
	}
	// The hub's own clients (API server, etcd) open a few more meanwhile.
	waitFor(t, 10*time.Second, "the hub's file descriptors back near where they were", func() (bool, string) {
		n := openFiles(t, h.Pid())
		return n <= baseFDs+50, fmt.Sprintf("%d, %d before the attack", n, baseFDs)
	})
	t.Logf("after: the hub holds %d file descriptors, %d before the attack", openFiles(t, h.Pid()), baseFDs)
	t.Logf("%s", grepMetrics(h.metrics(t), "flotilla_tcp_connections_timed_out_total", "flotilla_tcp_connections_open"))

	t.Run("one source address holds at most its share", func(t *testing.T) {
		g := &idleGroup{name: "TCP to the WebSocket port from one address", n: 100, open: func(int) (net.Conn, error) {
			return dialFrom(net.IPv4(127, 0, 0, 1), wsAddr)
		}}
		g.openAll(t)
		waitFor(t, headerTimeout/2, "all but 64 refused", func() (bool, string) {
			left := g.left()
			return left == 64, fmt.Sprintf("%d open", left)
		})
		m := h.metrics(t)
		if !strings.Contains(m, `flotilla_tcp_connections_refused_total{listener="websocket"} 36`+"\n") {
			t.Errorf("metrics say %s, want 36 refused on the WebSocket listener", grepMetrics(m, "flotilla_tcp_connections_refused_total"))
		}
		t.Logf("after: 100 connections from one address, 64 held, 36 closed at once; %s", grepMetrics(m, "flotilla_tcp_connections_refused_total"))
	})
}

// openAll opens g's connections, 16 at a time, and reads each until the
// hub closes it.
func (g *idleGroup) openAll(t *testing.T) {
	t.Helper()
	g.conns = make([]*idleConn, g.n)
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	errs := make(chan error, g.n)
	for i := range g.n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			c, err := g.open(i)
			if err != nil {
				errs <- fmt.Errorf("%s %d: %w", g.name, i, err)
				return
			}
			g.conns[i] = readUntilClosed(t, c)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// left is how many of g's connections the hub still holds.
func (g *idleGroup) left() int {
	n := 0
	for _, c := range g.conns {
		if c != nil && !c.closed.Load() {
			n++
		}
	}
	return n
}

func countOpen(groups []*idleGroup) int {
	n := 0
	for _, g := range groups {
		n += g.left()
	}
	return n
}

// readUntilClosed reads c (answers included) until the hub closes it,
// then notes that; the test's end closes it otherwise.
func readUntilClosed(t *testing.T, c net.Conn) *idleConn {
	ic := &idleConn{}
	t.Cleanup(func() { _ = c.Close() })
	go func() {
		_, _ = io.Copy(io.Discard, c)
		ic.closed.Store(true)
	}()
	return ic
}

// dialFrom opens a TCP connection from ip to addr.
func dialFrom(ip net.IP, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// requestFrom sends one GET of path over plain HTTP from ip.
func requestFrom(ip net.IP, addr, path string) (net.Conn, error) {
	c, err := dialFrom(ip, addr)
	if err != nil {
		return nil, err
	}
	return c, writeGet(c, path)
}

// tlsRequestFrom completes a TLS handshake from ip without a client
// certificate and sends one GET of path.
func tlsRequestFrom(ip net.IP, addr, path string) (net.Conn, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second},
		Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}} // an attacker checks nothing
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return c, writeGet(c, path)
}

func writeGet(c net.Conn, path string) error {
	_, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: hub\r\n\r\n")
	return err
}

// openFiles counts the file descriptors process pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
