package netbed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The kernels these tests run on have no netem qdisc, so delay and jitter
// come from a relay in user space: a UDP socket that holds each datagram
// for the delay plus a random part of the jitter before it sends it on, in
// both directions. Jitter reorders datagrams, as netem's does.

const (
	// maxRelayClients bounds the client addresses a relay serves.
	maxRelayClients = 64
	// maxInFlight bounds the datagrams a relay holds; beyond it, it drops
	// (a full queue, as a router's).
	maxInFlight = 4096
)

// Relay is a delaying UDP relay; see Bed.DelayRelay.
type Relay struct {
	front  net.PacketConn
	via    *Namespace
	target string
	ctx    context.Context

	mu            sync.Mutex
	delay, jitter time.Duration
	rng           *rand.Rand
	clients       map[string]net.Conn // by client address

	inFlight, relayed, dropped atomic.Int64
}

// DelayRelay listens for UDP on listenAddr inside from and relays each
// client's datagrams to dialAddr from a socket of that client's own,
// opened inside via (so that they cross the bed's router as the client's
// would), holding every datagram for the current delay and jitter (none
// until SetDelay) in each direction. It runs until the bed is closed.
func (b *Bed) DelayRelay(from *Namespace, listenAddr string, via *Namespace, dialAddr string) (*Relay, error) {
	front, err := from.ListenPacket(listenAddr)
	if err != nil {
		return nil, fmt.Errorf("netbed: relay %s: %w", listenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Relay{front: front, via: via, target: dialAddr, ctx: ctx, clients: map[string]net.Conn{},
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if err := b.serve("relay", func() { cancel(); r.close() }, r.serve); err != nil {
		return nil, err
	}
	return r, nil
}

// Addr is where the relay listens.
func (r *Relay) Addr() net.Addr { return r.front.LocalAddr() }

// SetDelay makes every datagram from now on wait delay plus a uniformly
// random part of jitter.
func (r *Relay) SetDelay(delay, jitter time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay, r.jitter = delay, jitter
}

// Counts returns the datagrams relayed and those dropped because too many
// were held.
func (r *Relay) Counts() (relayed, dropped int64) { return r.relayed.Load(), r.dropped.Load() }

// wait is the hold of the next datagram.
func (r *Relay) wait() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.delay
	if r.jitter > 0 {
		d += time.Duration(r.rng.Int64N(int64(r.jitter)))
	}
	return d
}

// later sends b with send after the hold, unless the relay holds too many
// or has closed by then.
func (r *Relay) later(b []byte, send func([]byte)) {
	if r.inFlight.Add(1) > maxInFlight {
		r.inFlight.Add(-1)
		r.dropped.Add(1)
		return
	}
	held := append([]byte(nil), b...)
	time.AfterFunc(r.wait(), func() {
		defer r.inFlight.Add(-1)
		if r.ctx.Err() != nil {
			return
		}
		// Counted first: once sent, the answer may reach a reader that
		// then reads the count.
		r.relayed.Add(1)
		send(held)
	})
}

// serve reads the clients' datagrams until the relay closes.
func (r *Relay) serve() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.front.ReadFrom(buf)
		if err != nil {
			return
		}
		up, err := r.upstream(from)
		if err != nil {
			r.dropped.Add(1)
			continue
		}
		r.later(buf[:n], func(b []byte) { _, _ = up.Write(b) })
	}
}

// upstream is client's socket towards the target, opened (and its answers
// relayed back) on its first datagram.
func (r *Relay) upstream(client net.Addr) (net.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[client.String()]; ok {
		return c, nil
	}
	if len(r.clients) >= maxRelayClients {
		return nil, fmt.Errorf("netbed: relay serves %d clients already", maxRelayClients)
	}
	c, err := r.via.Dial(r.ctx, "udp", r.target)
	if err != nil {
		return nil, err
	}
	r.clients[client.String()] = c
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			r.later(buf[:n], func(b []byte) { _, _ = r.front.WriteTo(b, client) })
		}
	}()
	return c, nil
}

func (r *Relay) close() {
	r.front.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		c.Close()
	}
}
