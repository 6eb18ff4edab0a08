package agent

import (
	"math/rand/v2"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
)

// Reconnect backoff: start at 1s, double up to 30s, each delay jittered by
// ±20% so that agents cut off together do not reconnect together. The
// delays stop at 8s (backoffMaxUnreachable) unless the hub refused this
// agent: a hub that is gone or restarting costs nothing to dial, and one
// that is back but busy refuses cheaply (HubBusy), while a fleet waiting
// 16 and 30 s would come back long after the hub did.
const (
	backoffInitial        = time.Second
	backoffMax            = 30 * time.Second
	backoffMaxUnreachable = 8 * time.Second
	backoffJitter         = 0.2
	// stableSession is how long a welcomed session must last for the next
	// reconnect to start again from backoffInitial.
	stableSession = 30 * time.Second
)

// A hub that refuses a connection at its first packet because it has too
// many handshakes in flight (after a restart, the whole fleet dials at
// once) is up and asks for a short wait: the agent dials it again after
// BusyRetryMin plus up to BusyRetrySpread, without growing its back-off.
const (
	BusyRetryMin    = time.Second
	BusyRetrySpread = 2 * time.Second
)

// RefusedByHub reports whether the hub answered a dial or session and
// refused this agent (its identity in the TLS handshake, or the session
// with a protocol error such as Unauthorized): retrying soon would not
// help, and each retry costs the hub a handshake.
func RefusedByHub(err error) bool {
	return inErrorTree(err, anyOf[*protocol.Error]) ||
		inErrorTree(err, func(te *quic.TransportError) bool { return te.Remote && te.ErrorCode.IsCryptoError() })
}

// HubBusy reports whether err is a hub's refusal of a QUIC connection
// before its handshake: QUIC's CONNECTION_REFUSED, which a hub sends when
// --max-handshakes are in flight (or while it stops).
func HubBusy(err error) bool {
	return inErrorTree(err, func(te *quic.TransportError) bool { return te.Remote && te.ErrorCode == quic.ConnectionRefused })
}

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

// Capped returns the delay before the next attempt, as Next, but at most
// max (jittered as Next's are).
func (b *backoff) Capped(max time.Duration) time.Duration {
	d := b.Next()
	factor := 1 - backoffJitter + 2*backoffJitter*b.rand.Float64()
	return min(d, time.Duration(float64(max)*factor))
}

// Reset makes the next delay start from the initial value again.
func (b *backoff) Reset() { b.next = b.initial }

// Busy returns the delay before dialling a busy hub again (see HubBusy);
// the back-off is left as it was.
func (b *backoff) Busy() time.Duration {
	return BusyRetryMin + time.Duration(b.rand.Int64N(int64(BusyRetrySpread)))
}
