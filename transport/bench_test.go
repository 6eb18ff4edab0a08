package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/procstat"
)

// quicHub is a QUIC listener with the hub's TLS settings on loopback.
type quicHub struct {
	ln       *quic.Listener
	accepted chan *quic.Conn
}

func (h *testHub) startQUIC(b *testing.B) *quicHub {
	b.Helper()
	return h.startQUICWith(b, h.serverTLS(b))
}

// serverTLS is the hub's QUIC TLS configuration with a serving
// certificate of h's CA.
func (h *testHub) serverTLS(b *testing.B) *tls.Config {
	b.Helper()
	serving := issue(b, h.ca, pki.Request{CommonName: "hub", IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: pki.ServerAuth, ValidFor: time.Hour})
	return protocol.ServerTLSConfig(serving, h.pool)
}

func (h *testHub) startQUICWith(b *testing.B, conf *tls.Config) *quicHub {
	b.Helper()
	ln, err := quic.ListenAddr("127.0.0.1:0", conf, protocol.QUICConfig())
	if err != nil {
		b.Fatal(err)
	}
	q := &quicHub{ln: ln, accepted: make(chan *quic.Conn)}
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			q.accepted <- c
		}
	}()
	b.Cleanup(func() { ln.Close() })
	return q
}

// pair connects an agent over QUIC and returns both ends.
func (q *quicHub) pair(b *testing.B, conf *tls.Config) (agent, hub Conn) {
	b.Helper()
	c, err := quic.DialAddr(b.Context(), q.ln.Addr().String(), conf, protocol.QUICConfig())
	if err != nil {
		b.Fatal(err)
	}
	s := <-q.accepted
	b.Cleanup(func() { c.CloseWithError(0, ""); s.CloseWithError(0, "") })
	return FromQUIC(c), FromQUIC(s)
}

// BenchmarkRoundTrip: one 100-byte request and its answer on an open
// stream (a lease renewal on the control stream), per transport.
func BenchmarkRoundTrip(b *testing.B) {
	b.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	h := startHub(b)
	for _, kind := range []Kind{QUIC, WebSocket} {
		b.Run(string(kind), func(b *testing.B) {
			conf := h.agentTLS(b, "edge-1")
			var agent, hub Conn
			if kind == QUIC {
				agent, hub = h.startQUIC(b).pair(b, conf)
			} else {
				agent, hub = h.connect(b, conf)
			}
			str, err := agent.OpenStreamSync(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			msg := make([]byte, 100)
			if _, err := str.Write(msg); err != nil {
				b.Fatal(err)
			}
			in, err := hub.AcceptStream(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			go func() { // echo
				buf := make([]byte, 100)
				for {
					if _, err := io.ReadFull(in, buf); err != nil {
						return
					}
					if _, err := in.Write(buf); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 100)
			b.ResetTimer()
			for b.Loop() {
				if _, err := str.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(str, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConnectionMemory: heap held per idle agent connection (both
// ends, in one process, one listener), per transport. Run it with
// -benchtime 1x: each iteration opens 50 connections.
func BenchmarkConnectionMemory(b *testing.B) {
	b.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	h := startHub(b)
	const conns = 50
	for _, kind := range []Kind{QUIC, WebSocket} {
		b.Run(string(kind), func(b *testing.B) {
			conf := h.agentTLS(b, "edge-1")
			q := h.startQUIC(b)
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for range conns {
					var agent Conn
					if kind == QUIC {
						agent, _ = q.pair(b, conf)
					} else {
						agent, _ = h.connect(b, conf)
					}
					str, err := agent.OpenStreamSync(b.Context())
					if err != nil {
						b.Fatal(err)
					}
					if _, err := str.Write([]byte("control")); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/conns/1024, "KiB/conn")
			}
		})
	}
}

// BenchmarkHandshake: one agent connection over QUIC with the hub's TLS
// settings (both ends authenticated, ECDSA P-256), from the dial to a
// first request answered on a stream (as Hello and Welcome), then closed;
// both ends in one process, so cpu-µs/op (the process's CPU time; ns/op
// is the wall time) is what a fleet reconnecting to a restarted hub costs
// per agent on a machine it shares with the hub.
// "resumed" measures what TLS session resumption would save: the hub
// sends no tickets today (see protocol.ServerTLSConfig).
func BenchmarkHandshake(b *testing.B) {
	b.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	h := startHub(b)
	for _, resume := range []bool{false, true} {
		name := "full"
		if resume {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			server, agent := h.serverTLS(b), h.agentTLS(b, "edge-1")
			if resume {
				server.SessionTicketsDisabled = false
				agent.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			}
			q := h.startQUICWith(b, server)
			if resume {
				handshake(b, q, agent) // the first ticket
			}
			resumed := 0
			cpuBefore := cpuSeconds(b)
			for b.Loop() {
				if handshake(b, q, agent) {
					resumed++
				}
			}
			b.ReportMetric((cpuSeconds(b)-cpuBefore)*1e6/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(resumed)/float64(b.N), "resumed/op")
		})
	}
}

// handshake connects an agent to q, answers one request on a stream,
// closes both ends and reports whether TLS resumed a session.
func handshake(b *testing.B, q *quicHub, conf *tls.Config) (resumed bool) {
	b.Helper()
	c, err := quic.DialAddr(b.Context(), q.ln.Addr().String(), conf, protocol.QUICConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	s := <-q.accepted
	defer s.CloseWithError(0, "")
	out, err := c.OpenStreamSync(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := out.Write([]byte{1}); err != nil {
		b.Fatal(err)
	}
	in, err := s.AcceptStream(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(in, buf); err != nil {
		b.Fatal(err)
	}
	if _, err := in.Write(buf); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(out, buf); err != nil {
		b.Fatal(err)
	}
	return s.ConnectionState().TLS.DidResume
}

// cpuSeconds is this process's CPU time (10 ms resolution: run enough
// iterations).
func cpuSeconds(b *testing.B) float64 {
	b.Helper()
	sec, err := procstat.CPUSeconds(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	return sec
}
