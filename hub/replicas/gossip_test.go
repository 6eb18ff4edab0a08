package replicas

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/hub/handover"
	"github.com/flotilla-io/flotilla/hub/relay"
	"github.com/google/go-cmp/cmp"
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
			s := &Gossip{logger: slog.New(slog.DiscardHandler)}
			s.leading.Store(tt.leading)
			for _, msg := range tt.received {
				s.receive(msg)
			}
			got := ""
			if tb := s.TakeOver(t0.Add(tt.now), 10*time.Second); tb != nil {
				got = tb.Leader + "@" + tb.TakenAt.Sub(t0).String()
			}
			if got != tt.want {
				t.Errorf("took over the table of %q, want %q", got, tt.want)
			}
			if !s.leading.Load() {
				t.Error("not leading after takeOver")
			}
			if again := s.TakeOver(t0.Add(tt.now), 10*time.Second); again != nil {
				t.Error("a table was taken over twice")
			}
		})
	}
}

// TestRelayIntake: the leader applies a replica's batches in order, asks
// for a full batch when one arrives late or a replica's first is partial
// (at most once a second), and calls a replica silent after
// relaySilence without a batch.
func TestRelayIntake(t *testing.T) {
	batch := func(replica string, seq uint64, full bool) *relay.Batch {
		return &relay.Batch{Replica: replica, HubID: "hub", Seq: seq, Full: full}
	}
	type step struct {
		b                   *relay.Batch
		at                  time.Duration
		wantApply, wantSync bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order, full first", []step{
			{batch("b", 1, true), 0, true, false},
			{batch("b", 2, false), 100 * time.Millisecond, true, false},
		}},
		{"partial first: applied, full asked for", []step{
			{batch("b", 7, false), 0, true, true},
			{batch("b", 8, true), 100 * time.Millisecond, true, false},
		}},
		{"a late batch: dropped, full asked for once a second", []step{
			{batch("b", 1, true), 0, true, false},
			{batch("b", 3, false), 100 * time.Millisecond, true, false},
			{batch("b", 2, false), 150 * time.Millisecond, false, true},
			{batch("b", 3, true), 200 * time.Millisecond, false, false},
			{batch("b", 1, true), 1200 * time.Millisecond, false, true},
			{batch("b", 4, true), 1300 * time.Millisecond, true, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newRelayIntake()
			for i, st := range tc.steps {
				apply, sync := in.admit(st.b, t0.Add(st.at))
				if apply != st.wantApply || sync != st.wantSync {
					t.Errorf("step %d (seq %d): apply %v, resync %v; want %v, %v", i, st.b.Seq, apply, sync, st.wantApply, st.wantSync)
				}
			}
		})
	}

	t.Run("silence and loss", func(t *testing.T) {
		in := newRelayIntake()
		in.admit(batch("b", 1, true), t0)
		in.admit(batch("c", 1, true), t0.Add(time.Second))
		if got := in.silent(t0.Add(relaySilence)); len(got) != 0 {
			t.Errorf("silent after exactly relaySilence: %v", got)
		}
		got := in.silent(t0.Add(relaySilence + time.Millisecond))
		if diff := cmp.Diff(map[string]time.Time{"b": t0}, got); diff != "" {
			t.Errorf("silent replicas (-want +got):\n%s", diff)
		}
		if heard := in.forget("c", t0.Add(time.Hour)); !heard.Equal(t0.Add(time.Second)) {
			t.Errorf("forget c: last heard %v, want t0+1s", heard)
		}
		if heard := in.forget("c", t0.Add(time.Hour)); !heard.Equal(t0.Add(time.Hour)) {
			t.Errorf("forget c again: %v, want now", heard)
		}
		// A replica back after it was lost starts over: its first partial
		// batch asks for a full one.
		if apply, sync := in.admit(batch("b", 2, false), t0.Add(time.Minute)); !apply || !sync {
			t.Errorf("b back: apply %v, resync %v; want both", apply, sync)
		}
	})
}

// TestWithRenewing: a replica taking over counts its own renewing agents
// as renewing whatever the last leader's table says (CI: a leader killed
// 10 ms after member-1 connected to it listed member-1 as not renewing,
// and member-1, renewing on the new leader, went Unknown for 0.2 s).
func TestWithRenewing(t *testing.T) {
	table := &handover.Table{Leader: "a", TakenAt: t0, Sessions: []handover.Session{
		{Cluster: "m1", LastRenewal: t0.Add(-time.Minute)},
		{Cluster: "m2", Renewing: true, LastRenewal: t0},
		{Cluster: "m3", LastRenewal: t0.Add(-time.Minute)},
	}}
	got := WithRenewing(table, []string{"m1", "m4"})
	want := &handover.Table{Leader: "a", TakenAt: t0, Sessions: []handover.Session{
		{Cluster: "m1", Renewing: true, LastRenewal: t0.Add(-time.Minute)},
		{Cluster: "m2", Renewing: true, LastRenewal: t0},
		{Cluster: "m3", LastRenewal: t0.Add(-time.Minute)},
		{Cluster: "m4", Renewing: true},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithRenewing (-want +got):\n%s", diff)
	}
	if table.Sessions[0].Renewing || len(table.Sessions) != 3 {
		t.Errorf("WithRenewing changed the table it was given: %+v", table.Sessions)
	}
	if WithRenewing(table, nil) != table {
		t.Error("WithRenewing with no clusters made a copy")
	}
}

func TestRelayRenewingClusters(t *testing.T) {
	now := t0.Add(time.Hour)
	s := NewRelay("hub-b", "replica-b", nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	s.live = map[string]*relay.Session{
		"renewed":            {Cluster: "renewed", LeaseSeconds: 4, ConnectedAt: now.Add(-time.Minute), LastRenewal: now.Add(-2 * time.Second)},
		"stopped renewing":   {Cluster: "stopped renewing", LeaseSeconds: 4, ConnectedAt: now.Add(-time.Minute), LastRenewal: now.Add(-2*time.Second - time.Millisecond)},
		"just connected":     {Cluster: "just connected", LeaseSeconds: 4, ConnectedAt: now.Add(-time.Second)},
		"default lease":      {Cluster: "default lease", ConnectedAt: now.Add(-time.Minute), LastRenewal: now.Add(-19 * time.Second)},
		"default lease, old": {Cluster: "default lease, old", ConnectedAt: now.Add(-time.Minute), LastRenewal: now.Add(-21 * time.Second)},
	}
	got := s.RenewingClusters(now, 40*time.Second)
	slices.Sort(got)
	want := []string{"default lease", "just connected", "renewed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenewingClusters (-want +got):\n%s", diff)
	}
}
