package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// hubStagger is how long a dial waits for one hub replica before it tries
// the next one as well: long enough that the replica that served the last
// session (tried first) keeps its agents when it is up, short enough that
// a dead one costs little.
const hubStagger = 300 * time.Millisecond

// splitHubs returns the addresses of a comma-separated list (--hub names
// every hub replica the agent may use).
func splitHubs(list string) []string {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// hubAddrs returns where the hub is reached over kind, the replica that
// served the last session first.
func (a *Agent) hubAddrs(kind transport.Kind) []string {
	list := a.cfg.Hub
	if kind == transport.WebSocket {
		list = a.cfg.HubWebSocket
	}
	addrs := splitHubs(list)
	a.hubMu.Lock()
	last := a.lastHub[kind]
	a.hubMu.Unlock()
	for i, addr := range addrs {
		if addr == last {
			return append(append([]string{addr}, addrs[:i]...), addrs[i+1:]...)
		}
	}
	return addrs
}

// lastHubAddr is the address of the replica kind last connected to.
func (a *Agent) lastHubAddr(kind transport.Kind) string {
	a.hubMu.Lock()
	addr := a.lastHub[kind]
	a.hubMu.Unlock()
	if addr == "" {
		addr = a.hubAddrs(kind)[0]
	}
	return addr
}

// dialAny connects over kind to the first hub replica that completes a
// handshake: the preferred one at once, each next one hubStagger later or
// as soon as the one before failed. Connections that complete after the
// first are closed.
func (a *Agent) dialAny(ctx context.Context, kind transport.Kind, tlsConf *tls.Config, explain func(error) error, silentFor time.Duration) (transport.Conn, func(), error) {
	addrs := a.hubAddrs(kind)
	if len(addrs) == 1 {
		return a.dialOne(ctx, kind, addrs[0], tlsConf, explain, silentFor)
	}
	raceCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, len(addrs))
	var started, pending int
	start := func() {
		addr := addrs[started]
		started++
		pending++
		go func() {
			conn, release, err := a.dialOne(raceCtx, kind, addr, tlsConf, explain, silentFor)
			results <- dialResult{addr, conn, release, err}
		}()
	}
	start()
	stagger := time.NewTimer(hubStagger) // a network wait: real time, as QUIC's own
	defer stagger.Stop()
	var errs []error
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				a.hubMu.Lock()
				if a.lastHub == nil {
					a.lastHub = map[transport.Kind]string{}
				}
				a.lastHub[kind] = r.addr
				a.hubMu.Unlock()
				cancel()
				go closeLosers(results, pending)
				return r.conn, r.release, nil
			}
			errs = append(errs, r.err)
			if started < len(addrs) {
				start()
				stagger.Reset(hubStagger)
			}
		case <-stagger.C:
			if started < len(addrs) {
				start()
				stagger.Reset(hubStagger)
			}
		}
	}
	return nil, nil, errors.Join(errs...)
}

// dialResult is the outcome of one dial of a race.
type dialResult struct {
	addr    string
	conn    transport.Conn
	release func()
	err     error
}

// closeLosers closes the connections of a race's other dials that
// completed anyway.
func closeLosers(results <-chan dialResult, pending int) {
	for range pending {
		if r := <-results; r.err == nil {
			r.conn.CloseWithError(protocol.CloseNormal, "another hub replica answered first")
			r.release()
		}
	}
}

// withServerName returns tlsConf for dialing addr: a hub replica's
// certificate is checked against the host the agent dialed.
func withServerName(tlsConf *tls.Config, addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == tlsConf.ServerName {
		return tlsConf
	}
	c := tlsConf.Clone()
	c.ServerName = host
	return c
}
