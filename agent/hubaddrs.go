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
// handshake (raceDials), and prefers that replica on the next dial.
func (a *Agent) dialAny(ctx context.Context, kind transport.Kind, tlsConf *tls.Config, explain func(error) error, silentFor time.Duration) (transport.Conn, func(), error) {
	addrs := a.hubAddrs(kind)
	dial := func(ctx context.Context, addr string) (transport.Conn, func(), error) {
		return a.dialOne(ctx, kind, addr, tlsConf, explain, silentFor)
	}
	closeConn := func(c transport.Conn) { c.CloseWithError(protocol.CloseNormal, "another hub replica answered first") }
	addr, conn, release, err := raceDials(ctx, addrs, dial, closeConn, nil)
	if err != nil {
		return nil, nil, err
	}
	if len(addrs) > 1 {
		a.hubMu.Lock()
		if a.lastHub == nil {
			a.lastHub = map[transport.Kind]string{}
		}
		a.lastHub[kind] = addr
		a.hubMu.Unlock()
	}
	return conn, release, nil
}

// raceDials dials the candidates (hub replicas, or the addresses one name
// resolves to) in order: the first at once, each next one hubStagger later
// or as soon as the one before failed. The first to connect wins; the
// connections that complete after it are closed with closeConn and
// released. A failure that decisive accepts ends the race with its error
// (nil: none does); otherwise, without a winner, the error joins every
// dial's.
func raceDials[A, C any](ctx context.Context, candidates []A, dial func(context.Context, A) (C, func(), error), closeConn func(C), decisive func(error) bool) (A, C, func(), error) {
	var (
		noCandidate A
		none        C
	)
	if len(candidates) == 1 {
		conn, release, err := dial(ctx, candidates[0])
		return candidates[0], conn, release, err
	}
	raceCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		candidate A
		conn      C
		release   func()
		err       error
	}
	results := make(chan result, len(candidates))
	var started, pending int
	start := func() {
		candidate := candidates[started]
		started++
		pending++
		go func() {
			conn, release, err := dial(raceCtx, candidate)
			results <- result{candidate, conn, release, err}
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
			if r.err == nil || decisive != nil && decisive(r.err) {
				cancel()
				go func() { // the losers that connected anyway
					for range pending {
						if late := <-results; late.err == nil {
							closeConn(late.conn)
							late.release()
						}
					}
				}()
				if r.err != nil {
					return noCandidate, none, nil, r.err
				}
				return r.candidate, r.conn, r.release, nil
			}
			errs = append(errs, r.err)
			if started < len(candidates) {
				start()
				stagger.Reset(hubStagger)
			}
		case <-stagger.C:
			if started < len(candidates) {
				start()
				stagger.Reset(hubStagger)
			}
		}
	}
	return noCandidate, none, nil, errors.Join(errs...)
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
