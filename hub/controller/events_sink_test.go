package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// blockingSink holds every write until released, and counts how many run
// at once.
type blockingSink struct {
	release      chan struct{}
	running, max atomic.Int64
}

func (s *blockingSink) hold(ctx context.Context) (*eventsv1.Event, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.max.Load()
		if n <= m || s.max.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-s.release:
		return &eventsv1.Event{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *blockingSink) Create(ctx context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	return s.hold(ctx)
}
func (s *blockingSink) Update(ctx context.Context, _ *eventsv1.Event) (*eventsv1.Event, error) {
	return s.hold(ctx)
}
func (s *blockingSink) Patch(ctx context.Context, _ *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.hold(ctx)
}

func TestBoundedSinkWritesAFewAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingSink{release: make(chan struct{})}
		sink := newBoundedSink(next)
		var wg sync.WaitGroup
		for i := range 3 * eventWriters {
			wg.Go(func() {
				var err error
				switch i % 3 {
				case 0:
					_, err = sink.Create(t.Context(), &eventsv1.Event{})
				case 1:
					_, err = sink.Update(t.Context(), &eventsv1.Event{})
				default:
					_, err = sink.Patch(t.Context(), &eventsv1.Event{}, nil)
				}
				if err != nil {
					t.Errorf("write: %v", err)
				}
			})
		}
		synctest.Wait()
		// Patches run beside the creates and updates, in slots of their own.
		if got := next.running.Load(); got != eventWriters+eventPatchers {
			t.Errorf("%d writes running, want %d", got, eventWriters+eventPatchers)
		}
		if got := sink.waiting.Load(); got != 2*eventWriters {
			t.Errorf("%d creates and updates counted waiting or running, want %d", got, 2*eventWriters)
		}
		close(next.release)
		wg.Wait()
		if got := next.max.Load(); got != eventWriters+eventPatchers {
			t.Errorf("at most %d writes ran at once, want %d", got, eventWriters+eventPatchers)
		}
		if got := sink.waiting.Load(); got != 0 {
			t.Errorf("%d writes still counted after all returned", got)
		}
	})
}

func TestBoundedSinkTimesOutAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newBoundedSink(&blockingSink{release: make(chan struct{})})
		start := time.Now()
		_, err := sink.Create(t.Context(), &eventsv1.Event{})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != eventWriteTimeout {
			t.Errorf("write to a stuck API: %v after %v, want a deadline after %v", err, time.Since(start), eventWriteTimeout)
		}
	})
}

func TestRecorderDropsWhenTooManyWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingSink{release: make(chan struct{})}
		sink := newBoundedSink(next)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range maxEventsWaiting {
			wg.Go(func() { _, _ = sink.Create(ctx, &eventsv1.Event{}) })
		}
		synctest.Wait()
		r := &apiRecorder{ctx: ctx, sink: sink}
		if !sink.full() {
			t.Fatalf("%d writes waiting: not full", sink.waiting.Load())
		}
		r.Event(corev1.ObjectReference{Kind: "Cluster", Name: "edge-1"}, corev1.EventTypeNormal, "AgentConnected", "connected")
		if got := r.Dropped(); got != 1 {
			t.Errorf("Dropped() = %d, want 1", got)
		}
		cancel()
		wg.Wait()
		if sink.full() {
			t.Error("still full after every write ended")
		}
	})
}
