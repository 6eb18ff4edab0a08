package controller

import (
	"context"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// client-go's events broadcaster writes each event from a goroutine of its
// own, retrying for minutes. A burst (10,000 agents connecting at once)
// thereby made thousands of API requests at a time: the HTTP/2 client
// opened a connection per 250 of them and the hub ran out of file
// descriptors. These bound it.
const (
	// eventWriters is how many event writes run at once.
	eventWriters = 16
	// maxEventsWaiting is how many writes may wait for a writer before new
	// events are dropped (and counted).
	maxEventsWaiting = 5000
	// eventPatchers is how many series patches run at once.
	eventPatchers = 2
	// eventWriteTimeout bounds one write; the broadcaster retries.
	eventWriteTimeout = 10 * time.Second
)

// boundedSink is an events.EventSink that writes through next at most
// eventWriters at a time. Patches have slots of their own: the broadcaster
// patches series while holding the lock every new event takes first, so a
// patch must not queue behind thousands of creates.
type boundedSink struct {
	next       events.EventSink
	slots      chan struct{}
	patchSlots chan struct{}
	waiting    atomic.Int64 // creates and updates not done, running or waiting
}

func newBoundedSink(next events.EventSink) *boundedSink {
	return &boundedSink{next: next, slots: make(chan struct{}, eventWriters), patchSlots: make(chan struct{}, eventPatchers)}
}

// full says whether a new event should be dropped rather than queued.
func (s *boundedSink) full() bool { return s.waiting.Load() >= maxEventsWaiting }

func (s *boundedSink) write(ctx context.Context, do func(context.Context) (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	return inSlot(ctx, s.slots, do)
}

// inSlot runs do once a slot is free, within eventWriteTimeout.
func inSlot(ctx context.Context, slots chan struct{}, do func(context.Context) (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-slots }()
	ctx, cancel := context.WithTimeout(ctx, eventWriteTimeout)
	defer cancel()
	return do(ctx)
}

func (s *boundedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.write(ctx, func(ctx context.Context) (*eventsv1.Event, error) { return s.next.Create(ctx, e) })
}

func (s *boundedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.write(ctx, func(ctx context.Context) (*eventsv1.Event, error) { return s.next.Update(ctx, e) })
}

func (s *boundedSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return inSlot(ctx, s.patchSlots, func(ctx context.Context) (*eventsv1.Event, error) { return s.next.Patch(ctx, old, data) })
}
