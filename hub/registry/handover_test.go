package registry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/hub/handover"
)

// TestRegistryTakeoverJudgesByTheLastLeadersSessions: a replica taking
// over gives the restart grace only to clusters whose agents were
// renewing to the last leader; the others expire at their last renewal
// (as the leader knew it, newer than the stored lease) plus the grace
// period. Grace 40 s, leases of 40 s (renewed every 10 s): renewing means
// a renewal within the last 20 s.
func TestRegistryTakeoverJudgesByTheLastLeadersSessions(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	leader := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	names := []string{"served", "between-sessions", "stopped", "silent", "gone-earlier", "not-in-table"}
	for _, name := range names {
		leader.connect(name)
		leader.renew(name)
	}
	leader.flush() // the stored leases say t0
	clk.Step(4 * time.Second)
	leader.renew("stopped") // its last renewal, never stored
	leader.reg.Disconnect("stopped", "session-stopped", "agent stopped")
	clk.Step(21 * time.Second)
	leader.renew("served")
	leader.renew("between-sessions")
	// An agent told to go away (or whose connection was replaced) is
	// between two sessions: its renewals say it lives.
	leader.reg.Disconnect("between-sessions", "session-between-sessions", "go away")
	leader.reg.Disconnect("gone-earlier", "session-gone-earlier", "agent stopped")
	// "silent" keeps its session (a SIGKILLed agent's connection lasts
	// until the idle timeout) but has not renewed for 25 s.
	table := leader.reg.Sessions("old-leader")
	table.Sessions = slices.DeleteFunc(table.Sessions, func(s handover.Session) bool { return s.Cluster == "not-in-table" }) // registered after the last table
	// The leader dies at t0+26s: the renewals since t0 were never stored.
	clk.Step(5 * time.Second)
	next := newRegistryFixture(t, clk, clk.Now(), func(cfg *Config) { cfg.Handover = table })
	ready := func() map[string]metav1.ConditionStatus {
		out := map[string]metav1.ConditionStatus{}
		for _, name := range names {
			out[name] = readyOf(next.cluster(name))
		}
		return out
	}
	const T, U = metav1.ConditionTrue, metav1.ConditionUnknown
	steps := []struct {
		at   time.Duration // since t0
		want map[string]metav1.ConditionStatus
	}{
		{40*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"served": T, "between-sessions": T, "stopped": T, "silent": T, "gone-earlier": T, "not-in-table": T}},
		{40 * time.Second, map[string]metav1.ConditionStatus{"served": T, "between-sessions": T, "stopped": T, "silent": U, "gone-earlier": U, "not-in-table": T}},
		{44*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"served": T, "between-sessions": T, "stopped": T, "silent": U, "gone-earlier": U, "not-in-table": T}},
		{44 * time.Second, map[string]metav1.ConditionStatus{"served": T, "between-sessions": T, "stopped": U, "silent": U, "gone-earlier": U, "not-in-table": T}},
		// The restart grace: takeover (t0+30s) + grace 40s + lease 40s.
		{110*time.Second - time.Millisecond, map[string]metav1.ConditionStatus{"served": T, "between-sessions": T, "stopped": U, "silent": U, "gone-earlier": U, "not-in-table": T}},
		{110 * time.Second, map[string]metav1.ConditionStatus{"served": U, "between-sessions": U, "stopped": U, "silent": U, "gone-earlier": U, "not-in-table": U}},
	}
	for _, st := range steps {
		next.advance(t0.Add(st.at).Sub(clk.Now()))
		if diff := cmp.Diff(st.want, ready()); diff != "" {
			t.Errorf("at t0+%v, Ready (-want +got):\n%s", st.at, diff)
		}
	}
}

// TestRegistrySessionsJustReconnected: an agent that reconnects after an
// outage counts as renewing before its first renewal, and a renewal from
// the future is not taken over.
func TestRegistrySessionsJustReconnected(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("back")
	f.renew("back")
	f.reg.Disconnect("back", "session-back", "outage")
	clk.Step(30 * time.Second)
	f.connect("back") // no renewal yet
	got := f.reg.Sessions("me").Index()["back"]
	if !got.Renewing || !got.LastRenewal.Equal(t0) {
		t.Errorf("session table entry %+v, want renewing, last renewal t0", got)
	}
	e := &entry{}
	takeOver(e, handover.Session{Cluster: "x", Renewing: true, LastRenewal: t0.Add(time.Hour)}, t0)
	if !e.obs.LastRenewal.IsZero() {
		t.Errorf("a renewal after the table was taken over: %v", e.obs.LastRenewal)
	}
}

// TestTakeOverRenewedAfterTheTable: a cluster the table lists as not
// renewing keeps the restart grace when its stored lease was renewed
// after the table was taken (its agent connected between two tables);
// without such a renewal it gets none.
func TestTakeOverRenewedAfterTheTable(t *testing.T) {
	tests := []struct {
		name      string
		stored    time.Time // the stored lease's renewal
		wantGrace bool
	}{
		{"renewed after the table", t0.Add(200 * time.Millisecond), true},
		{"last renewed before the table", t0.Add(-time.Minute), false},
		{"never renewed", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &entry{}
			e.obs.LastRenewal = tt.stored
			takeOver(e, handover.Session{Cluster: "x", LastRenewal: t0.Add(-time.Minute)}, t0)
			if got := !e.obs.NoRestartGrace; got != tt.wantGrace {
				t.Errorf("restart grace %v, want %v", got, tt.wantGrace)
			}
		})
	}
}

// TestRegistryTakeoverReconnectedAgent: an agent the last leader had no
// session for that connects to the new one renews as usual.
func TestRegistryTakeoverReconnectedAgent(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	table := &handover.Table{Leader: "old", TakenAt: t0, Sessions: []handover.Session{{Cluster: "edge-1", LastRenewal: t0.Add(-39 * time.Second)}}}
	first := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	first.connect("edge-1")
	first.renew("edge-1")
	first.shutdown()
	next := newRegistryFixture(t, clk, t0, func(cfg *Config) { cfg.Handover = table })
	next.connect("edge-1")
	clk.Step(500 * time.Millisecond)
	next.renew("edge-1")
	next.advance(39 * time.Second)
	if got := readyOf(next.cluster("edge-1")); got != metav1.ConditionTrue {
		t.Fatalf("Ready = %q after a renewal to the new leader, want True", got)
	}
}

func TestRegistrySessions(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("a")
	f.renew("a")
	f.connect("b")
	f.reg.Disconnect("b", "session-b", "gone")
	got := f.reg.Sessions("me")
	want := &handover.Table{Leader: "me", TakenAt: t0, Sessions: []handover.Session{{Cluster: "a", Renewing: true, LastRenewal: t0}, {Cluster: "b"}}}
	if diff := cmp.Diff(want, got, cmp.Transformer("sort", sortSessions)); diff != "" {
		t.Errorf("Sessions (-want +got):\n%s", diff)
	}
}

func sortSessions(in []handover.Session) []handover.Session {
	out := append([]handover.Session(nil), in...)
	slices.SortFunc(out, func(a, b handover.Session) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

// TestRegistryDropSessionWritesNothing: a session the hub closed for its
// own shutdown leaves no event and no write behind; the agent's next
// Connect is what gets recorded.
func TestRegistryDropSessionWritesNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0)
	f.connect("edge-1")
	f.renew("edge-1")
	f.flush()
	events := f.reg.stats.eventsRecorded.Load()
	f.reg.DropSession("edge-1", "session-edge-1")
	f.reg.mu.Lock()
	session, dirty := f.reg.entries["edge-1"].session, f.reg.dirty["edge-1"]
	f.reg.mu.Unlock()
	if session != "" || dirty {
		t.Errorf("after DropSession: session %q, dirty %v; want none and clean", session, dirty)
	}
	if got := f.reg.stats.eventsRecorded.Load() - events; got != 0 {
		t.Errorf("DropSession recorded %d events, want 0", got)
	}
	// A newer session of the cluster is not dropped by an older one's end.
	f.connect("edge-1")
	f.reg.DropSession("edge-1", "an-older-session")
	f.reg.mu.Lock()
	session = f.reg.entries["edge-1"].session
	f.reg.mu.Unlock()
	if session != "session-edge-1" {
		t.Errorf("an older session's drop ended the live one: session %q", session)
	}
}
