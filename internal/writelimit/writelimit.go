// Package writelimit bounds how many API writes a client has in flight at
// once. The hub gives the writes that only report status (an agent's Work
// status, a binding's aggregated status, a template's status) clients of
// their own, limited here, so that when a failover floods the embedded API
// server those reports queue in the hub and the API server's CPU goes to
// the writes that move workloads: evictions, placements and Works.
package writelimit

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/flotilla-io/flotilla/internal/apiwrites"
)

// Limiter lets at most Slots writes through the transports it wraps at
// once; it is safe for concurrent use.
type Limiter struct {
	slots   chan struct{}
	waiting atomic.Int64
}

// New returns a Limiter of slots writes in flight (at least one).
func New(slots int) *Limiter {
	return &Limiter{slots: make(chan struct{}, max(slots, 1))}
}

// Slots is how many writes may be in flight at once.
func (l *Limiter) Slots() int { return cap(l.slots) }

// Waiting is how many writes wait for a slot now.
func (l *Limiter) Waiting() int { return int(l.waiting.Load()) }

// Wrap returns next with the limit on its writes (as apiwrites.Classify
// tells them): a write waits for a slot until its request's context ends.
// Reads pass freely. Every transport Wrap returns shares l's slots.
func (l *Limiter) Wrap(next http.RoundTripper) http.RoundTripper {
	return transport{next: next, limiter: l}
}

type transport struct {
	next    http.RoundTripper
	limiter *Limiter
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, isWrite := apiwrites.Classify(req); !isWrite {
		return t.next.RoundTrip(req)
	}
	release, err := t.limiter.acquire(req)
	if err != nil {
		return nil, err
	}
	defer release()
	return t.next.RoundTrip(req)
}

// acquire waits for a slot for req.
func (l *Limiter) acquire(req *http.Request) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	default:
	}
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	select {
	case l.slots <- struct{}{}:
		return l.release, nil
	case <-req.Context().Done():
		return nil, fmt.Errorf("%s %s: wait for one of %d write slots: %w", req.Method, req.URL.Path, l.Slots(), req.Context().Err())
	}
}

func (l *Limiter) release() { <-l.slots }
