package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/protocol"
)

// fixedSource always yields the same number, so the jitter factor is fixed:
// 0 gives -20%, 1<<52 (Float64 0.5) none, 1<<53-1 nearly +20%.
type fixedSource uint64

func (s fixedSource) Uint64() uint64 { return uint64(s) }

func TestBackoff(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name string
		src  rand.Source
		// resetAfter resets the backoff after that many delays (0: never).
		resetAfter int
		want       []time.Duration
	}{
		{
			name: "no jitter doubles up to the cap",
			src:  fixedSource(1 << 52),
			want: []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s},
		},
		{
			name: "lowest jitter",
			src:  fixedSource(0),
			want: []time.Duration{800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond,
				6400 * time.Millisecond, 12800 * time.Millisecond, 24 * s, 24 * s},
		},
		{
			name: "highest jitter never exceeds the cap",
			src:  fixedSource(1<<53 - 1),
			want: []time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond, 4800 * time.Millisecond,
				9600 * time.Millisecond, 19200 * time.Millisecond, 30 * s, 30 * s},
		},
		{
			name:       "reset starts over",
			src:        fixedSource(1 << 52),
			resetAfter: 3,
			want:       []time.Duration{1 * s, 2 * s, 4 * s, 1 * s, 2 * s},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(backoffInitial, backoffMax, tc.src)
			var got []time.Duration
			for i := range tc.want {
				if tc.resetAfter > 0 && i == tc.resetAfter {
					b.Reset()
				}
				got = append(got, roundMillis(b.Next()))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}

// roundMillis hides float rounding in the jitter arithmetic.
func roundMillis(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func TestBackoffJitterStaysInBounds(t *testing.T) {
	b := newBackoff(backoffInitial, backoffMax, rand.NewPCG(1, 2))
	base := backoffInitial
	for i := range 50 {
		d := b.Next()
		lo, hi := time.Duration(float64(base)*0.8), min(time.Duration(float64(base)*1.2), backoffMax)
		if d < lo || d > hi {
			t.Fatalf("delay %d = %v, want within [%v, %v]", i, d, lo, hi)
		}
		base = min(2*base, backoffMax)
	}
}

func TestRetryDelay(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	type session struct {
		welcomed bool
		lasted   time.Duration
		refused  bool // by the hub
	}
	for _, tc := range []struct {
		name     string
		sessions []session
		want     []time.Duration
	}{
		{
			name:     "dial failures back off",
			sessions: []session{{}, {}, {}},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			name:     "short sessions do not reset",
			sessions: []session{{}, {welcomed: true, lasted: stableSession - time.Millisecond}, {}},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			name:     "a stable session resets",
			sessions: []session{{}, {}, {welcomed: true, lasted: stableSession}, {}},
			want:     []time.Duration{time.Second, 2 * time.Second, time.Second, 2 * time.Second},
		},
		{
			name:     "a hub gone or unreachable is dialled at least every 8 s",
			sessions: []session{{}, {}, {}, {}, {}, {}},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second},
		},
		{
			name:     "a hub that refuses the agent is dialled up to every 30 s",
			sessions: []session{{refused: true}, {refused: true}, {refused: true}, {refused: true}, {refused: true}, {refused: true}},
			want:     []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second},
		},
		{
			name:     "a long unwelcomed attempt does not reset",
			sessions: []session{{}, {lasted: time.Minute}},
			want:     []time.Duration{time.Second, 2 * time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackoff(backoffInitial, backoffMax, fixedSource(1<<52))
			var got []time.Duration
			for _, s := range tc.sessions {
				var welcomedAt time.Time
				if s.welcomed {
					welcomedAt = t0
				}
				got = append(got, roundMillis(retryDelay(b, welcomedAt, t0.Add(s.lasted), s.refused)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("delays (-want +got):\n%s", diff)
			}
		})
	}
}

// A busy hub is dialled again within BusyRetryMin..+BusyRetrySpread, and
// the back-off it had built up stays as it was.
func TestBackoffBusy(t *testing.T) {
	b := newBackoff(time.Second, 30*time.Second, rand.NewPCG(1, 2))
	for range 3 {
		b.Next() // 1, 2, 4 s: the next base is 8 s
	}
	for range 1000 {
		if d := b.Busy(); d < BusyRetryMin || d >= BusyRetryMin+BusyRetrySpread {
			t.Fatalf("Busy() = %v, want within [%v, %v)", d, BusyRetryMin, BusyRetryMin+BusyRetrySpread)
		}
	}
	if b.next != 8*time.Second {
		t.Errorf("the back-off's next base after busy retries = %v, want 8s as before", b.next)
	}
}

func TestHubBusy(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused by the hub", &quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}, true},
		{"refused, wrapped", fmt.Errorf("dial hub: %w", &quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}), true},
		{"refused here", &quic.TransportError{ErrorCode: quic.ConnectionRefused}, false},
		{"another error of the hub", &quic.TransportError{Remote: true, ErrorCode: quic.ProtocolViolation}, false},
		{"timeout", &quic.IdleTimeoutError{}, false},
		{"none", nil, false},
		// A race of dials joins their errors, in the order they failed.
		{"raced: a local error first, then busy", errors.Join(&quic.TransportError{ErrorCode: quic.ConnectionRefused}, &quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}), true},
		{"raced: busy first", errors.Join(&quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}, &quic.IdleTimeoutError{}), true},
		{"raced: no busy", errors.Join(&quic.TransportError{ErrorCode: quic.ConnectionRefused}, &quic.IdleTimeoutError{}), false},
	} {
		if got := HubBusy(tc.err); got != tc.want {
			t.Errorf("%s: HubBusy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRefusedByHub(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unauthorized", fmt.Errorf("session: %w", &protocol.Error{Code: protocol.CodeUnauthorized}), true},
		{"a TLS alert of the hub", &quic.TransportError{Remote: true, ErrorCode: quic.TransportErrorCode(0x100 + 42)}, true},
		{"a TLS failure here", &quic.TransportError{ErrorCode: quic.TransportErrorCode(0x100 + 42)}, false},
		{"busy", &quic.TransportError{Remote: true, ErrorCode: quic.ConnectionRefused}, false},
		{"timeout", &quic.IdleTimeoutError{}, false},
		{"GoAway", &goAwayError{reason: "hub shutting down"}, false},
		{"raced: a local TLS failure first, then the hub's alert", errors.Join(&quic.TransportError{ErrorCode: quic.TransportErrorCode(0x100 + 42)}, &quic.TransportError{Remote: true, ErrorCode: quic.TransportErrorCode(0x100 + 42)}), true},
	} {
		if got := RefusedByHub(tc.err); got != tc.want {
			t.Errorf("%s: RefusedByHub = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAgentReadsABusyHub: a hub refusing the agent's dial at its first
// packet (too many handshakes in flight) is read as busy through the
// agent's own dial (no fallback to the WebSocket: the hub answered), and
// the agent comes back in 1-3 s without growing its back-off.
func TestAgentReadsABusyHub(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) {
		h.admit = func(context.Context, *quic.ClientInfo) (context.Context, error) {
			return nil, errors.New("too many handshakes in flight")
		}
	})
	a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy)
	_, release, err := a.dialHub(t.Context())
	if err == nil {
		release()
		t.Fatal("the dial of a refusing hub succeeded")
	}
	if !HubBusy(err) || RefusedByHub(err) {
		t.Fatalf("dial error %q: want it read as the hub busy, not as a refusal of this agent", err)
	}
	b := newBackoff(backoffInitial, backoffMax, fixedSource(1<<52))
	b.Next()
	b.Next() // the next base is 4 s
	if d := reconnectDelay(b, err, time.Time{}, time.Now()); d < BusyRetryMin || d >= BusyRetryMin+BusyRetrySpread {
		t.Errorf("wait before dialling the busy hub again = %v, want within [%v, %v)", d, BusyRetryMin, BusyRetryMin+BusyRetrySpread)
	}
	if b.next != 4*time.Second {
		t.Errorf("back-off base after the busy hub = %v, want 4s as before", b.next)
	}
}
