package writelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
)

// heldServer is a RoundTripper that holds every request until released,
// and says which it has.
type heldServer struct {
	mu      sync.Mutex
	arrived []string
	release chan struct{}
}

func (s *heldServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.arrived = append(s.arrived, req.Method+" "+req.URL.Path)
	s.mu.Unlock()
	<-s.release
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func (s *heldServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrived)
}

func statusWrite(ctx context.Context, name string) *http.Request {
	return httptest.NewRequestWithContext(ctx, http.MethodPut, "https://hub/apis/flotilla.io/v1alpha1/namespaces/ns/works/"+name+"/status", http.NoBody)
}

// TestWritesBeyondTheSlotsWait: with 2 slots, a third write waits (and is
// counted waiting) until one of the first two is answered; reads pass
// while the slots are full; every write is answered in the end.
func TestWritesBeyondTheSlotsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := &heldServer{release: make(chan struct{})}
		limiter := New(2)
		rt := limiter.Wrap(server)
		var answered sync.WaitGroup
		for _, name := range []string{"a", "b", "c"} {
			answered.Go(func() {
				if _, err := rt.RoundTrip(statusWrite(t.Context(), name)); err != nil {
					t.Errorf("write %s: %v", name, err)
				}
			})
		}
		synctest.Wait()
		if got := server.count(); got != 2 {
			t.Fatalf("%d writes reached the server with 2 slots; want 2", got)
		}
		if got := limiter.Waiting(); got != 1 {
			t.Errorf("Waiting() = %d; want 1", got)
		}

		answered.Go(func() {
			get := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "https://hub/apis/flotilla.io/v1alpha1/namespaces/ns/works/a", http.NoBody)
			if _, err := rt.RoundTrip(get); err != nil {
				t.Errorf("read: %v", err)
			}
		})
		synctest.Wait()
		if got := server.count(); got != 3 {
			t.Fatalf("%d requests reached the server; want the 2 writes and the read", got)
		}

		server.release <- struct{}{} // one answer frees a slot for the waiting write
		synctest.Wait()
		if got := server.count(); got != 4 {
			t.Fatalf("%d requests reached the server after one answer; want 4", got)
		}
		if got := limiter.Waiting(); got != 0 {
			t.Errorf("Waiting() = %d after a slot freed; want 0", got)
		}
		close(server.release)
		answered.Wait()
	})
}

// TestWaitingWriteGivesUpWithItsContext: a write waiting for a slot
// returns its context's error and never reaches the server; the slot it
// never had is not given back.
func TestWaitingWriteGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := &heldServer{release: make(chan struct{})}
		limiter := New(1)
		rt := limiter.Wrap(server)
		go rt.RoundTrip(statusWrite(t.Context(), "a"))
		synctest.Wait()

		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := rt.RoundTrip(statusWrite(ctx, "b"))
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("waiting write whose context ended: err %v; want context.Canceled", err)
		}
		if got := server.count(); got != 1 {
			t.Errorf("%d writes reached the server; want only the first", got)
		}

		// The first write's slot is still held: one more write waits.
		go rt.RoundTrip(statusWrite(t.Context(), "c"))
		synctest.Wait()
		if got := limiter.Waiting(); got != 1 {
			t.Errorf("Waiting() = %d with the slot held; want 1", got)
		}
		close(server.release)
	})
}

func TestAtLeastOneSlot(t *testing.T) {
	for _, slots := range []int{-3, 0, 1} {
		if got := New(slots).Slots(); got != 1 {
			t.Errorf("New(%d).Slots() = %d; want 1", slots, got)
		}
	}
	if got := New(7).Slots(); got != 7 {
		t.Errorf("New(7).Slots() = %d", got)
	}
}
