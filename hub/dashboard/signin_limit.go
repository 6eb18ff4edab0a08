package dashboard

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/internal/netlimit"
)

// Failed sign-ins are limited per source address (an IPv4 address or an
// IPv6 /64): every token the hub has not seen costs a TokenReview, and
// guessing tokens must not be a matter of trying fast. A source may fail
// signInBurst times at once, then once per signInEvery. An attempt is
// taken before the TokenReview and given back when the token is accepted
// (or the API could not answer), so sign-ins that succeed cost nothing
// and concurrent attempts cannot overrun the budget. Tokens already
// answered (cached for the auth TTL) pass without an attempt.
const (
	signInBurst = 10
	signInEvery = 6 * time.Second // refill: 10 failures a minute
	// maxSignInSources are remembered; past them, sources whose budget
	// is whole again are forgotten, and new ones share one budget while
	// none is (a flood from many addresses gets no fresh budget each).
	maxSignInSources = 10_000
)

// ErrSignInLimited is returned, before any TokenReview, for a sign-in from
// a source that failed too often.
type ErrSignInLimited struct {
	Source netip.Prefix
	Wait   time.Duration // until the next attempt is allowed
}

func (e *ErrSignInLimited) Error() string {
	return fmt.Sprintf("too many failed sign-ins from %s: try again in %v", describeSource(e.Source), e.Wait.Round(time.Second)+time.Second)
}

func describeSource(src netip.Prefix) string {
	if name := netlimit.Name(src); name != "" {
		return name
	}
	return "this address"
}

// signInLimiter is a token bucket of sign-in failures per source.
type signInLimiter struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	sources  map[netip.Prefix]*bucket
	overflow bucket    // shared by new sources while the map is full
	swept    time.Time // when full sources were last looked through

	limited, failed atomic.Int64
}

// bucket holds tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newSignInLimiter(clk clock.PassiveClock) *signInLimiter {
	return &signInLimiter{clock: clk, sources: map[netip.Prefix]*bucket{}}
}

// refill brings b to now.
func (b *bucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = signInBurst, now
		return
	}
	if now.After(b.at) {
		b.tokens = min(signInBurst, b.tokens+float64(now.Sub(b.at))/float64(signInEvery))
		b.at = now
	}
}

// take takes an attempt for src, or says how long until there is one.
func (l *signInLimiter) take(src netip.Prefix) (bool, time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(src, now)
	b.refill(now)
	if b.tokens < 1 {
		l.limited.Add(1)
		return false, time.Duration((1 - b.tokens) * float64(signInEvery))
	}
	b.tokens--
	return true, 0
}

// giveBack returns the attempt of a sign-in that did not fail for its
// token.
func (l *signInLimiter) giveBack(src netip.Prefix) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(src, now)
	b.refill(now)
	b.tokens = min(signInBurst, b.tokens+1)
}

// bucketLocked is src's bucket, made if there is room.
func (l *signInLimiter) bucketLocked(src netip.Prefix, now time.Time) *bucket {
	if b, ok := l.sources[src]; ok {
		return b
	}
	if len(l.sources) >= maxSignInSources && now.Sub(l.swept) >= signInEvery {
		l.swept = now // at most once per refill: a sweep reads every source
		for s, b := range l.sources {
			if b.refill(now); b.tokens >= signInBurst {
				delete(l.sources, s)
			}
		}
	}
	if len(l.sources) >= maxSignInSources {
		return &l.overflow
	}
	b := &bucket{}
	l.sources[src] = b
	return b
}

// SignInStats count what the sign-in limit did since the hub started.
type SignInStats struct {
	// Failed sign-ins: the hub's API refused the token.
	Failed int64
	// Limited sign-ins were refused without a TokenReview: their source
	// had failed too often.
	Limited int64
}

// SignInStats returns the counts so far.
func (d *Dashboard) SignInStats() SignInStats {
	return SignInStats{Failed: d.auth.limit.failed.Load(), Limited: d.auth.limit.limited.Load()}
}

// requestSource is the source a request counts against: its peer's
// address, grouped as netlimit groups them. Forwarded-for headers are not
// trusted: anyone can write them.
func requestSource(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	return netlimit.Source(net.TCPAddrFromAddrPort(ap))
}
