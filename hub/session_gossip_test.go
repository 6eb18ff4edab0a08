package hub

import (
	"log/slog"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/hub/handover"
)

func TestSessionGossipKeepsTheNewestFreshTable(t *testing.T) {
	table := func(leader string, at time.Duration) []byte {
		return handover.Encode(&handover.Table{Leader: leader, TakenAt: t0.Add(at), Sessions: []handover.Session{{Cluster: "m1", Renewing: true, LastRenewal: t0}}})
	}
	tests := []struct {
		name     string
		received [][]byte
		leading  bool // when they arrive
		now      time.Duration
		want     string // leader@time of the table taken over; "" none
	}{
		{"none", nil, false, 0, ""},
		{"one leader's newest", [][]byte{table("a", time.Second), table("a", 2*time.Second), table("a", 1500*time.Millisecond)}, false, 3 * time.Second, "a@2s"},
		{"another leader's, whatever its clock", [][]byte{table("a", 2*time.Second), table("b", 1500*time.Millisecond)}, false, 3 * time.Second, "b@1.5s"},
		{"garbage is ignored", [][]byte{table("a", time.Second), []byte("not a table")}, false, 2 * time.Second, "a@1s"},
		{"too old", [][]byte{table("a", time.Second)}, false, 12 * time.Second, ""},
		{"a leader ignores tables", [][]byte{table("a", time.Second)}, true, 2 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sessionGossip{logger: slog.New(slog.DiscardHandler)}
			s.leading.Store(tt.leading)
			for _, msg := range tt.received {
				s.receive(msg)
			}
			got := ""
			if tb := s.takeOver(t0.Add(tt.now), 10*time.Second); tb != nil {
				got = tb.Leader + "@" + tb.TakenAt.Sub(t0).String()
			}
			if got != tt.want {
				t.Errorf("took over the table of %q, want %q", got, tt.want)
			}
			if !s.leading.Load() {
				t.Error("not leading after takeOver")
			}
			if again := s.takeOver(t0.Add(tt.now), 10*time.Second); again != nil {
				t.Error("a table was taken over twice")
			}
		})
	}
}
