package netlimit

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Throttle lets a log line through at most once per interval: under an
// attack the hub says what happens without writing a line per packet.
type Throttle struct {
	every time.Duration
	clock clock.PassiveClock

	mu   sync.Mutex
	last time.Time // zero: nothing let through yet
	held int
}

// NewThrottle lets one line through per every, on clk (nil: real time).
func NewThrottle(every time.Duration, clk clock.PassiveClock) *Throttle {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Throttle{every: every, clock: clk}
}

// Allow says whether to log now and, if so, how many lines it held back
// since the last one it let through.
func (t *Throttle) Allow() (ok bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.held++
		return false, 0
	}
	t.last, held, t.held = now, t.held, 0
	return true, held
}
