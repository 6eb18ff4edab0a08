package netlimit

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Limits are the caps of a Listener.
type Limits struct {
	// MaxConns bounds the connections held at once; at the cap the
	// listener accepts nothing more until one closes: new connections wait
	// in the kernel's accept queue. 0: no cap.
	MaxConns int
	// MaxConnsPerSource bounds the connections of one Source held at
	// once; a connection beyond it is closed as soon as it is accepted.
	// 0: no cap.
	MaxConnsPerSource int
}

// Stats are what a Listener counted since it opened.
type Stats struct {
	// Open are the connections it holds now.
	Open int64
	// Refused were closed at once: their source held MaxConnsPerSource.
	Refused int64
	// Waited were accepted late: MaxConns were open when they came.
	Waited int64
	// TimedOut were closed after a read deadline passed: a TLS handshake,
	// request headers or an idle keep-alive that took too long.
	TimedOut int64
}

// logEvery is how often a Listener may log that it refused or waited.
const logEvery = 10 * time.Second

// Listener caps the connections it hands out, in total and per source;
// a connection stops counting when it is closed or Released.
type Listener struct {
	net.Listener
	name   string
	limits Limits
	logger *slog.Logger
	// slots holds a token per connection counted; nil without MaxConns.
	slots                chan struct{}
	done                 chan struct{}
	closeOnce            sync.Once
	refusedLog, waitLog  *Throttle
	mu                   sync.Mutex
	sources              Counts
	open, refused        atomic.Int64
	waited, timedOutConn atomic.Int64
}

// NewListener caps ln's connections; name says which listener in logs.
// clk paces the logs (nil: real time).
func NewListener(ln net.Listener, name string, limits Limits, logger *slog.Logger, clk clock.PassiveClock) *Listener {
	l := &Listener{Listener: ln, name: name, limits: limits, logger: logger, done: make(chan struct{}),
		refusedLog: NewThrottle(logEvery, clk), waitLog: NewThrottle(logEvery, clk)}
	if limits.MaxConns > 0 {
		l.slots = make(chan struct{}, limits.MaxConns)
	}
	return l
}

// Accept waits for a free place, then for a connection whose source is
// under its cap; it closes those that are not.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		if err := l.acquire(); err != nil {
			return nil, err
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.releaseSlot()
			return nil, err
		}
		if conn := l.admit(c); conn != nil {
			return conn, nil
		}
	}
}

// Close stops listening and ends a wait for a place.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Stats returns the listener's counts so far.
func (l *Listener) Stats() Stats {
	return Stats{Open: l.open.Load(), Refused: l.refused.Load(), Waited: l.waited.Load(), TimedOut: l.timedOutConn.Load()}
}

// acquire takes a place among MaxConns, waiting while none is free.
func (l *Listener) acquire() error {
	if l.slots == nil {
		return nil
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	l.waited.Add(1)
	if ok, held := l.waitLog.Allow(); ok {
		l.logger.Warn("connection cap reached: new connections wait to be accepted until one closes", "listener", l.name,
			"maxConns", l.limits.MaxConns, "timesSinceLastLog", held)
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-l.done:
		return fmt.Errorf("%s listener closed: %w", l.name, net.ErrClosed)
	}
}

func (l *Listener) releaseSlot() {
	if l.slots != nil {
		<-l.slots
	}
}

// admit counts c against its source, or closes it if the source is at
// its cap.
func (l *Listener) admit(c net.Conn) *Conn {
	src := Source(c.RemoteAddr())
	l.mu.Lock()
	held := l.sources.Get(src)
	full := l.limits.MaxConnsPerSource > 0 && held >= l.limits.MaxConnsPerSource
	if !full {
		l.sources.Add(src, 1)
	}
	l.mu.Unlock()
	if full {
		_ = c.Close()
		l.releaseSlot()
		l.refused.Add(1)
		if ok, held := l.refusedLog.Allow(); ok {
			l.logger.Warn("connection refused: its source address holds the most connections allowed", "listener", l.name, "source", src.String(),
				"maxConnsPerSource", l.limits.MaxConnsPerSource, "refusedSinceLastLog", held)
		}
		return nil
	}
	l.open.Add(1)
	return &Conn{Conn: c, l: l, src: src}
}

// forget stops counting a connection of src.
func (l *Listener) forget(src netip.Prefix) {
	l.mu.Lock()
	l.sources.Add(src, -1)
	l.mu.Unlock()
	l.open.Add(-1)
	l.releaseSlot()
}

// Conn is a connection a Listener counts until it is closed or Released.
type Conn struct {
	net.Conn
	l        *Listener
	src      netip.Prefix
	released atomic.Bool
	// timedOut: a read failed on its deadline (the server's timeouts).
	timedOut atomic.Bool
}

// Read notes a read that failed on its deadline.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.timedOut.Store(true)
	}
	return n, err
}

// Close closes the connection and stops counting it.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.release() && c.timedOut.Load() {
		c.l.timedOutConn.Add(1)
	}
	return err
}

// Release stops counting c (it stays open): it is no longer the caps'
// business, e.g. a WebSocket handed to what authenticates it.
func (c *Conn) Release() { c.release() }

func (c *Conn) release() bool {
	if !c.released.CompareAndSwap(false, true) {
		return false
	}
	c.l.forget(c.src)
	return true
}

// Release stops counting c if it is, or wraps (through NetConn, as
// *tls.Conn does), a Conn.
func Release(c net.Conn) {
	for c != nil {
		if lc, ok := c.(*Conn); ok {
			lc.Release()
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}

// Defaults of ServerLimits' timeouts, for the hub's servers on TCP.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
)

// ServerLimits are what an HTTP server on TCP gives peers that have not
// authenticated: its listener's caps and its timeouts.
type ServerLimits struct {
	Limits
	// ReadHeaderTimeout bounds the TLS handshake (net/http uses it for
	// that too), then each request's headers: a connection that sends
	// nothing goes after it.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next
	// request.
	IdleTimeout time.Duration
}

// DefaultServerLimits are caps of maxConns and perSource with the default
// timeouts.
func DefaultServerLimits(maxConns, perSource int) ServerLimits {
	return ServerLimits{Limits: Limits{MaxConns: maxConns, MaxConnsPerSource: perSource},
		ReadHeaderTimeout: DefaultReadHeaderTimeout, IdleTimeout: DefaultIdleTimeout}
}

// Apply sets s's timeouts on srv.
func (s ServerLimits) Apply(srv *http.Server) {
	srv.ReadHeaderTimeout = s.ReadHeaderTimeout
	srv.IdleTimeout = s.IdleTimeout
}

// Or fills s's zero fields from def.
func (s ServerLimits) Or(def ServerLimits) ServerLimits {
	s.MaxConns = cmp.Or(s.MaxConns, def.MaxConns)
	s.MaxConnsPerSource = cmp.Or(s.MaxConnsPerSource, def.MaxConnsPerSource)
	s.ReadHeaderTimeout = cmp.Or(s.ReadHeaderTimeout, def.ReadHeaderTimeout)
	s.IdleTimeout = cmp.Or(s.IdleTimeout, def.IdleTimeout)
	return s
}
