package agent

import (
	"math/rand/v2"
	"time"
)

// Reconnect backoff: start at 1s, double up to 30s, each delay jittered by
// ±20% so that agents cut off together do not reconnect together.
const (
	backoffInitial = time.Second
	backoffMax     = 30 * time.Second
	backoffJitter  = 0.2
	// stableSession is how long a welcomed session must last for the next
	// reconnect to start again from backoffInitial.
	stableSession = 30 * time.Second
)

// backoff yields jittered, exponentially growing delays. It is not safe for
// concurrent use.
type backoff struct {
	initial, max time.Duration
	next         time.Duration // base of the next delay, before jitter
	rand         *rand.Rand
}

// newBackoff returns a backoff drawing its jitter from src.
func newBackoff(initial, max time.Duration, src rand.Source) *backoff {
	return &backoff{initial: initial, max: max, next: initial, rand: rand.New(src)}
}

// Next returns the delay before the next attempt and doubles the base for
// the one after, up to max. The delay is within ±20% of the base and never
// above max.
func (b *backoff) Next() time.Duration {
	base := b.next
	b.next = min(2*b.next, b.max)
	factor := 1 - backoffJitter + 2*backoffJitter*b.rand.Float64()
	return min(time.Duration(float64(base)*factor), b.max)
}

// Reset makes the next delay start from the initial value again.
func (b *backoff) Reset() { b.next = b.initial }
