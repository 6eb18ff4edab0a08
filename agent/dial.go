package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// dialHub connects to the hub with the agent's certificate.
func (a *Agent) dialHub(ctx context.Context) (conn transport.Conn, release func(), err error) {
	return a.dial(ctx, a.tls, explainConnError)
}

// dial connects with the TLS configuration tlsConf on the transports the
// chooser picks, the next one when one gets no answer; explain adds advice
// to a failed QUIC handshake. Call release once the connection is closed.
func (a *Agent) dial(ctx context.Context, tlsConf *tls.Config, explain func(error) error) (conn transport.Conn, release func(), err error) {
	order := a.transports.order(a.clock.Now())
	var failed []transport.Kind
	var errs []error
	for i, kind := range order {
		// With a fallback to go to, do not wait out QUIC's handshake
		// timeout where UDP is blocked.
		var silentFor time.Duration
		if i < len(order)-1 {
			silentFor = a.cfg.QUICFallbackAfter
		}
		conn, release, err = a.dialAny(ctx, kind, tlsConf, explain, silentFor)
		if err == nil {
			if len(failed) > 0 {
				a.log.Warn("connected over the fallback transport: QUIC got no answer (is UDP blocked on the way?)",
					"transport", kind, "quicError", errs[0], "retryQUICEvery", a.cfg.QUICRetryInterval)
			}
			a.transports.connected(kind, failed, a.clock.Now())
			a.cfg.metrics.dialed(kind, len(failed) > 0)
			return conn, release, nil
		}
		errs = append(errs, err)
		if i == len(order)-1 || !unanswered(ctx, err) {
			break
		}
		failed = append(failed, kind)
	}
	if len(errs) == 1 {
		return nil, nil, errs[0]
	}
	return nil, nil, fmt.Errorf("%w; then %w", errs[0], errs[1])
}

// dialOne connects over one transport. A QUIC dial gives up after
// silentFor (if not zero) unless the hub answered something by then.
func (a *Agent) dialOne(ctx context.Context, kind transport.Kind, addr string, tlsConf *tls.Config, explain func(error) error, silentFor time.Duration) (transport.Conn, func(), error) {
	tlsConf = withServerName(tlsConf, addr)
	if kind == transport.WebSocket {
		conn, err := transport.DialWebSocket(ctx, addr, tlsConf)
		if err != nil {
			return nil, nil, fmt.Errorf("dial hub %s over a WebSocket (TCP): %w", addr, err)
		}
		return conn, func() {}, nil
	}
	conn, release, err := a.dialQUIC(ctx, addr, tlsConf, explain, silentFor)
	if err != nil {
		return nil, nil, err
	}
	return transport.FromQUIC(conn), release, nil
}

// dialQUIC connects over QUIC from a UDP socket of the session's own. The
// returned release closes the socket and waits for quic-go's reader; call
// it once the connection is closed.
//
// quic.DialAddr would do the same, but it resolves without a context (a
// hung DNS lookup would delay shutdown) and leaks its socket when the name
// does not resolve, once per reconnect attempt.
//
// With silentFor, the dial gives up when nothing came back from the hub
// for that long: UDP is likely blocked. A hub that answered but is slow
// to complete handshakes (thousands of agents reconnecting after a
// restart) gets QUIC's whole handshake timeout, so that a busy hub does
// not push its fleet onto the fallback.
func (a *Agent) dialQUIC(ctx context.Context, hub string, tlsConf *tls.Config, explain func(error) error, silentFor time.Duration) (*quic.Conn, func(), error) {
	addrs, err := resolveUDP(ctx, hub, a.lookupIP)
	if err != nil {
		return nil, nil, err
	}
	// A name that resolves to several addresses (hub replicas behind one
	// DNS name, or one hub on IPv4 and IPv6) is raced like a list of
	// replicas: a dead address costs a stagger, not QUIC's timeout or the
	// fallback transport. An address whose hub refused the agent, busy or
	// for good, ends the race: the other addresses may be the same hub.
	dial := func(ctx context.Context, addr *net.UDPAddr) (*quic.Conn, func(), error) {
		conn, release, err := dialQUICAddr(ctx, addr, tlsConf, silentFor)
		if err != nil {
			where := hub
			if len(addrs) > 1 {
				where = hub + " (" + addr.String() + ")"
			}
			return nil, nil, fmt.Errorf("dial hub %s over QUIC: %w", where, explain(err))
		}
		return conn, release, nil
	}
	closeConn := func(c *quic.Conn) {
		_ = c.CloseWithError(quic.ApplicationErrorCode(protocol.CloseNormal), "another hub address answered first")
	}
	refused := func(err error) bool { return HubBusy(err) || RefusedByHub(err) }
	_, conn, release, err := raceDials(ctx, addrs, dial, closeConn, refused)
	return conn, release, err
}

// dialQUICAddr connects over QUIC to one address from a UDP socket of the
// session's own (see dialQUIC).
func dialQUICAddr(ctx context.Context, addr *net.UDPAddr, tlsConf *tls.Config, silentFor time.Duration) (conn *quic.Conn, release func(), err error) {
	// The wildcard address gives a dual-stack socket: IPv6 hubs too.
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, nil, fmt.Errorf("open UDP socket: %w", err)
	}
	tr := &quic.Transport{Conn: udp}
	release = func() {
		tr.Close() // returns once quic-go stopped reading the socket
		udp.Close()
	}
	conf := protocol.QUICConfig()
	dialCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := &answerWatch{}
	if silentFor > 0 {
		conf.Tracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return watch }
		// A network wait: real time, like QUIC's own timeouts.
		timer := time.AfterFunc(silentFor, func() {
			if !watch.answered.Load() {
				watch.gaveUp.Store(true)
				cancel()
			}
		})
		defer timer.Stop()
	}
	conn, err = tr.Dial(dialCtx, addr, tlsConf, conf)
	if err != nil {
		release()
		if watch.gaveUp.Load() && ctx.Err() == nil {
			err = fmt.Errorf("no answer over QUIC within %v: %w", silentFor, err)
		}
		return nil, nil, err
	}
	return conn, release, nil
}

// answerWatch is a qlog trace that only notes whether a packet arrived:
// whether the hub answered a dial at all.
type answerWatch struct{ answered, gaveUp atomic.Bool }

func (w *answerWatch) AddProducer() qlogwriter.Recorder { return w }
func (w *answerWatch) Close() error                     { return nil }

func (w *answerWatch) RecordEvent(e qlogwriter.Event) {
	if !w.answered.Load() && e.Name() == packetReceived {
		w.answered.Store(true)
	}
}

// packetReceived is the name of qlog's packet_received event.
const packetReceived = "transport:packet_received"

// resolveUDP resolves a host:port to every address of the host, once
// each, IPv4 first (as net.ResolveUDPAddr prefers it), each family in the
// resolver's order; lookup is net.DefaultResolver's LookupNetIP when nil.
func resolveUDP(ctx context.Context, hostport string, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) ([]*net.UDPAddr, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("hub address %q: %w", hostport, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("hub address %q: port: %w", hostport, err)
	}
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	ips, err := lookup(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve hub host %q: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, errors.New("resolve hub host " + strconv.Quote(host) + ": no addresses")
	}
	addrs := make([]*net.UDPAddr, 0, len(ips))
	seen := make(map[netip.Addr]bool, len(ips))
	for _, want4 := range []bool{true, false} {
		for _, ip := range ips {
			ip = ip.Unmap() // an IPv4 address given twice, once as IPv6, is dialled once
			if ip.Is4() == want4 && !seen[ip] {
				seen[ip] = true
				addrs = append(addrs, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(port))))
			}
		}
	}
	return addrs, nil
}
