package controllertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Recorder is a controller.Recorder that keeps the events, as
// "Type Reason Kind Name: message".
type Recorder struct {
	mu     sync.Mutex
	events []string
}

// Event keeps an event.
func (r *Recorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s %s: %s", eventType, reason, ref.Kind, ref.Name, message))
}

// List returns the events so far, in order.
func (r *Recorder) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Count is how many events start with prefix.
func (r *Recorder) Count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// AwaitEvents waits until the events from index from on are want: the
// controller records them after its writes, which the test may see first.
func (f *Fixture) AwaitEvents(from int, want ...string) {
	f.T.Helper()
	f.awaitEvents(want, func() []string { return f.Events.List()[from:] })
}

// AwaitEventsInAnyOrder waits until the events are want, in any order.
func (f *Fixture) AwaitEventsInAnyOrder(want ...string) {
	f.T.Helper()
	f.awaitEvents(slices.Sorted(slices.Values(want)), func() []string { return slices.Sorted(slices.Values(f.Events.List())) })
}

// awaitEvents waits until events returns as many as want, then compares.
func (f *Fixture) awaitEvents(want []string, events func() []string) {
	f.T.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, WaitTimeout, true, func(context.Context) (bool, error) {
		got = events()
		return len(got) >= len(want), nil
	})
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); err != nil || diff != "" {
		f.T.Errorf("events (-want +got):\n%s", diff)
	}
}
