package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
)

// dialHub connects to the hub from a UDP socket of the session's own. The
// returned release closes the socket and waits for quic-go's reader; call it
// once the connection is closed.
//
// quic.DialAddr would do the same, but it resolves without a context (a
// hung DNS lookup would delay shutdown) and leaks its socket when the name
// does not resolve, once per reconnect attempt.
func (a *Agent) dialHub(ctx context.Context) (conn *quic.Conn, release func(), err error) {
	return a.dial(ctx, a.tls, explainConnError)
}

// dial is dialHub with the TLS configuration tlsConf; explain adds advice
// to a failed handshake.
func (a *Agent) dial(ctx context.Context, tlsConf *tls.Config, explain func(error) error) (conn *quic.Conn, release func(), err error) {
	addr, err := resolveUDP(ctx, a.cfg.Hub)
	if err != nil {
		return nil, nil, err
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, nil, fmt.Errorf("open UDP socket: %w", err)
	}
	tr := &quic.Transport{Conn: udp}
	release = func() {
		tr.Close() // returns once quic-go stopped reading the socket
		udp.Close()
	}
	conn, err = tr.Dial(ctx, addr, tlsConf, protocol.QUICConfig())
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("dial hub %s: %w", a.cfg.Hub, explain(err))
	}
	return conn, release, nil
}

// resolveUDP resolves a host:port, preferring IPv4 as net.ResolveUDPAddr
// does.
func resolveUDP(ctx context.Context, hostport string) (*net.UDPAddr, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("hub address %q: %w", hostport, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("hub address %q: port: %w", hostport, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve hub host %q: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, errors.New("resolve hub host " + strconv.Quote(host) + ": no addresses")
	}
	ip := ips[0]
	for _, candidate := range ips {
		if candidate.Unmap().Is4() {
			ip = candidate
			break
		}
	}
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(port))), nil
}
