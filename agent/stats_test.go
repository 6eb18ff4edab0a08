package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEstimateClock(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, tc := range []struct {
		name                    string
		sent, received, hubTime time.Time
		wantRTT, wantOffset     time.Duration
	}{
		{"clocks in step", t0, t0.Add(20 * ms), t0.Add(10 * ms), 20 * ms, 0},
		{"hub ahead", t0, t0.Add(20 * ms), t0.Add(5*time.Second + 10*ms), 20 * ms, 5 * time.Second},
		{"hub behind", t0, t0.Add(40 * ms), t0.Add(-2*time.Second + 20*ms), 40 * ms, -2 * time.Second},
		{"ack before send (clock stepped back)", t0, t0.Add(-ms), t0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rtt, offset := estimateClock(tc.sent, tc.received, tc.hubTime)
			if diff := cmp.Diff([]time.Duration{tc.wantRTT, tc.wantOffset}, []time.Duration{rtt, offset}); diff != "" {
				t.Errorf("rtt, offset (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPendingRenewals(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var p pendingRenewals
	for seq := uint64(1); seq <= 3*maxPendingRenewals; seq++ {
		p.add(seq, t0.Add(time.Duration(seq)*time.Second), 10*seq)
	}
	if got := len(p.sent); got != maxPendingRenewals {
		t.Errorf("%d renewals remembered, want at most %d", got, maxPendingRenewals)
	}
	// The first renewal, forgotten for the bound, still starts the wait
	// for an ack.
	if r, ok := p.oldest(); !ok || !r.at.Equal(t0.Add(time.Second)) || r.packets != 10 {
		t.Errorf("oldest() = %+v, %v; want renewal 1, forgotten but unacknowledged", r, ok)
	}
	if _, ok := p.take(1); ok {
		t.Error("the oldest renewal is still remembered")
	}
	last := uint64(3 * maxPendingRenewals)
	at, ok := p.take(last - 1)
	if !ok || !at.Equal(t0.Add(time.Duration(last-1)*time.Second)) {
		t.Errorf("take(%d) = %v, %v; want its send time", last-1, at, ok)
	}
	if got := len(p.sent); got != 1 {
		t.Errorf("%d renewals remembered after an ack, want only the newer one", got)
	}
	if r, ok := p.oldest(); !ok || r.packets != 10*last || !r.at.Equal(t0.Add(time.Duration(last)*time.Second)) {
		t.Errorf("oldest() = %+v, %v; want renewal %d with its packet count", r, ok, last)
	}
	p.take(last)
	if r, ok := p.oldest(); ok {
		t.Errorf("oldest() after every ack = %+v, want none", r)
	}
}
