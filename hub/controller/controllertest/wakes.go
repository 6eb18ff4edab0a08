package controllertest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
)

// wakes are the wake-ups a controller asked for, in order, as
// name@deadline; changed is closed (and replaced) at each one.
type wakes struct {
	mu      sync.Mutex
	keys    []string
	changed chan struct{}
}

func wakeKey(name string, at time.Time) string { return name + "@" + at.UTC().Format(time.RFC3339) }

// RecordWake keeps a wake-up the controller asked for: the object name at
// at. It is the controllers' test hook "waiting".
func (f *Fixture) RecordWake(name string, at time.Time) {
	w := &f.wakes
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, wakeKey(name, at))
	if w.changed != nil {
		close(w.changed)
	}
	w.changed = make(chan struct{})
}

// WakeCount is how many wake-ups the controller asked for so far.
func (f *Fixture) WakeCount() int {
	f.wakes.mu.Lock()
	defer f.wakes.mu.Unlock()
	return len(f.wakes.keys)
}

// Woken reports whether the controller asked for any wake-up of name.
func (f *Fixture) Woken(name string) bool {
	f.wakes.mu.Lock()
	defer f.wakes.mu.Unlock()
	return slices.ContainsFunc(f.wakes.keys, func(key string) bool { return strings.HasPrefix(key, name+"@") })
}

// AwaitWake waits until the controller, after its first since wake-ups,
// asked to be woken at at for the object name.
func (f *Fixture) AwaitWake(since int, name string, at time.Time) {
	f.T.Helper()
	w, key := &f.wakes, wakeKey(name, at)
	timeout := time.After(WaitTimeout)
	for {
		w.mu.Lock()
		if w.changed == nil {
			w.changed = make(chan struct{})
		}
		ok, changed := slices.Contains(w.keys[since:], key), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			w.mu.Lock()
			keys := slices.Clone(w.keys)
			w.mu.Unlock()
			f.T.Fatalf("timed out waiting for the controller to wait for %s; it waits for %q", key, keys)
		}
	}
}

// PollNudgingClock polls cond until it holds, for WaitTimeout at the most,
// stepping clk by a millisecond every tenth poll: the queue takes AddAfters
// on its own goroutine, so a timer it sets just as the test steps the clock
// may start after the step.
func PollNudgingClock(ctx context.Context, clk *clocktesting.FakeClock, cond func(context.Context) bool) error {
	polls := 0
	return wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, WaitTimeout, true, func(ctx context.Context) (bool, error) {
		if polls++; polls%10 == 0 {
			clk.Step(time.Millisecond)
		}
		return cond(ctx), nil
	})
}
