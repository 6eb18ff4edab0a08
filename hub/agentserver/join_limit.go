package agentserver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/flotilla-io/flotilla/internal/netlimit"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// Join connections are limited per source address (an IPv6 /64): a join presents a
// bootstrap token, and guessing one must not be a matter of trying fast.
// The limit is far above what one address joins honestly (an agent joins
// once; a site behind one NAT joins a few clusters at a time).
const (
	joinBurst       = 30
	joinEvery       = 2 * time.Second // refill: 30 a minute
	maxJoinSources  = 10_000          // addresses remembered before idle ones are forgotten
	joinRefuseGrace = 2 * time.Second
)

// joinLimiter is a token bucket per source (joinSource).
type joinLimiter struct {
	mu      sync.Mutex
	sources map[string]*rate.Limiter
	limited int64
}

// allow takes a join attempt of source at now, or says how long to wait.
func (l *joinLimiter) allow(source string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sources == nil {
		l.sources = map[string]*rate.Limiter{}
	}
	lim, ok := l.sources[source]
	if !ok {
		if len(l.sources) >= maxJoinSources {
			l.forgetIdleLocked(now)
		}
		lim = rate.NewLimiter(rate.Every(joinEvery), joinBurst)
		l.sources[source] = lim
	}
	r := lim.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		l.limited++
		return false, delay
	}
	return true, 0
}

// forgetIdleLocked drops the addresses whose bucket is full again: they
// have not joined for a while.
func (l *joinLimiter) forgetIdleLocked(now time.Time) {
	for source, lim := range l.sources {
		if lim.TokensAt(now) >= joinBurst {
			delete(l.sources, source)
		}
	}
}

func (l *joinLimiter) limitedCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limited
}

// joinSource names the addresses addr's join attempts count against:
// its IPv4 address or its IPv6 /64 (a site picks any address in it).
func joinSource(addr net.Addr) string {
	if name := netlimit.Name(netlimit.Source(addr)); name != "" {
		return name
	}
	return addr.String()
}

// refuseJoin tells a join connection over its address's limit to come
// back later: an Error on its join stream if it opens one at once, and
// the close reason either way.
func (s *agentServer) refuseJoin(ctx context.Context, conn transport.Conn, source string, wait time.Duration) {
	message := fmt.Sprintf("too many join attempts from %s: try again in %v", source, wait.Round(time.Second)+time.Second)
	s.logger.Warn("join refused: too many attempts from this address", "remote", conn.RemoteAddr().String(), "retryIn", wait)
	acceptCtx, cancel := context.WithTimeout(ctx, joinRefuseGrace)
	defer cancel()
	if stream, err := conn.AcceptStream(acceptCtx); err == nil {
		_ = stream.SetWriteDeadline(time.Now().Add(joinRefuseGrace))
		_ = protocol.WriteMessage(stream, &protocol.Error{Code: protocol.CodeRateLimited, Message: message})
		_ = stream.Close()
		// A close at once could overtake the answer: the agent closes
		// once it has read it.
		select {
		case <-conn.Context().Done():
		case <-acceptCtx.Done():
		}
	}
	_ = conn.CloseWithError(protocol.CloseUnauthorized, protocol.CodeRateLimited+": "+message)
}
