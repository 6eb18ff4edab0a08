package controller

import (
	"context"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// awaitLen waits (in real time) until the queue holds n keys. The delaying
// queue takes AddAfters on its own goroutine: a timer it sets just as the
// test steps the clock may start after the step, so the clock is nudged by
// a millisecond while waiting.
func awaitLen(t *testing.T, q *Queue, clk *clocktesting.FakeClock, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %d keys queued, want %d", what, q.Len(), n)
		}
		time.Sleep(20 * time.Millisecond)
		clk.Step(time.Millisecond)
	}
}

func TestAddAfterWaitsForTheQueueClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	q := NewQueueWithClock("test", func(context.Context, string) error { return nil }, slog.New(slog.DiscardHandler), clk)
	t.Cleanup(q.queue.ShutDown)

	q.AddAfter("a", 10*time.Second)
	q.AddAfter("a", 20*time.Second) // later than the pending one: ignored
	clk.Step(9 * time.Second)
	time.Sleep(50 * time.Millisecond) // the queue's goroutine would add it now, if it were due
	if q.Len() != 0 {
		t.Fatalf("queued %d keys 9s into a 10s delay", q.Len())
	}
	clk.Step(time.Second)
	awaitLen(t, q, clk, 1, "a queued at its deadline")
	key, _ := q.queue.Get()
	q.queue.Done(key)
	if key != "a" {
		t.Fatalf("got key %q, want a", key)
	}
	clk.Step(time.Minute) // the ignored 20s AddAfter left nothing behind
	time.Sleep(50 * time.Millisecond)
	if q.Len() != 0 {
		t.Fatalf("the ignored AddAfter queued the key again")
	}

	// An earlier deadline replaces a later one.
	q.AddAfter("b", 30*time.Second)
	q.AddAfter("b", 5*time.Second)
	clk.Step(5 * time.Second)
	awaitLen(t, q, clk, 1, "b queued at the earlier deadline")

	// No delay: queued at once.
	q.AddAfter("c", 0)
	if q.Len() != 2 {
		t.Fatalf("AddAfter(0) did not queue at once")
	}
}
