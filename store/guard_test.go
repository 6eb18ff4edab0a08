package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestGuardRefusesAndRecovers fills a real embedded etcd with a 16 MiB
// quota: past half of it the guard refuses agent-driven writes; past the
// quota etcd raises NOSPACE; once the data is deleted and compacted the
// guard defragments, disarms the alarm and allows agents again.
func TestGuardRefusesAndRecovers(t *testing.T) {
	const quota = 16 << 20
	s, err := Open(t.Context(), Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Quota: quota})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var changes []bool
	g := s.NewGuard(GuardConfig{Quota: quota, AgentThreshold: 0.5, Interval: time.Minute, MinDefragFree: 1 << 20, MinDefragBetween: time.Nanosecond},
		func(refusing bool, _ string) { changes = append(changes, refusing) })
	// A standby's guard watches the same store and never acts.
	watcher := s.NewGuard(GuardConfig{Quota: quota, AgentThreshold: 0.5, Interval: time.Minute, MinDefragFree: 1 << 20, MinDefragBetween: time.Nanosecond, WatchOnly: true}, nil)
	watch := func(what string) GuardStats {
		t.Helper()
		if err := watcher.check(t.Context()); err != nil {
			t.Fatalf("%s: watch-only check: %v", what, err)
		}
		return watcher.Stats()
	}
	check := func(what string) GuardStats {
		t.Helper()
		if err := g.check(t.Context()); err != nil {
			t.Fatalf("%s: check: %v", what, err)
		}
		st := g.Stats()
		t.Logf("%s: %+v", what, st)
		return st
	}
	if st := check("empty"); st.Refusing || !g.AllowAgentWrite() {
		t.Fatalf("an empty store refuses agent writes: %+v", st)
	}

	value := strings.Repeat("x", 256<<10)
	var rev int64
	for i := 0; ; i++ {
		resp, err := s.Client().Put(t.Context(), fmt.Sprintf("/fill/%d", i), value)
		if errors.Is(err, rpctypes.ErrGRPCNoSpace) || errors.Is(err, rpctypes.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		rev = resp.Header.Revision
		if i > 200 {
			t.Fatal("no NOSPACE after 50 MiB in a 16 MiB quota")
		}
	}
	check("full")
	allowed := g.AllowAgentWrite()
	st := g.Stats()
	if !st.Refusing || !st.NoSpace || allowed || st.Refused != 1 {
		t.Fatalf("a full store: %+v; want refusing, NOSPACE, one refusal counted", st)
	}

	if _, err := s.Client().Delete(t.Context(), "/fill/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Client().Compact(t.Context(), rev+1, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if st := watch("full"); !st.Refusing || !st.NoSpace || watcher.AllowAgentWrite() {
		t.Errorf("the watch-only guard on a full store: %+v; want refusing", st)
	}
	if st := watch("deleted and compacted"); !st.NoSpace || st.Disarms != 0 || st.Defrags != 0 {
		t.Errorf("the watch-only guard acted: %+v; want the alarm left to the other guard", st)
	}
	check("deleted and compacted")
	st = check("again")
	if st := watch("recovered"); st.Refusing || !watcher.AllowAgentWrite() {
		t.Errorf("the watch-only guard after the recovery: %+v; want allowed", st)
	}
	if st.Refusing || st.NoSpace || st.Disarms == 0 || st.Defrags == 0 || !g.AllowAgentWrite() {
		t.Errorf("after the recovery: %+v; want allowed, no alarm, a disarm and a defragmentation", st)
	}
	if _, err := s.Client().Put(t.Context(), "/health", "stored"); err != nil {
		t.Errorf("a write after the recovery: %v", err)
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Errorf("refusing changed %v, want [true false]", changes)
	}
}

func TestRefuseAgents(t *testing.T) {
	const limit = 100 << 20
	tests := []struct {
		name              string
		refusing, noSpace bool
		inUse             int64
		want              bool
	}{
		{name: "below the limit", inUse: limit - 1, want: false},
		{name: "at the limit", inUse: limit, want: true},
		{name: "NOSPACE with room", inUse: 1, noSpace: true, want: true},
		{name: "refusing, just under the limit", refusing: true, inUse: limit - 1, want: true},
		{name: "refusing, at the resume mark", refusing: true, inUse: resumeBelow(limit), want: true},
		{name: "refusing, under the resume mark", refusing: true, inUse: resumeBelow(limit) - 1, want: false},
		{name: "refusing, NOSPACE under the resume mark", refusing: true, noSpace: true, inUse: 1, want: true},
	}
	for _, tt := range tests {
		if got := refuseAgents(tt.refusing, tt.inUse, limit, tt.noSpace); got != tt.want {
			t.Errorf("%s: refuseAgents(refusing=%v, inUse=%d, noSpace=%v) = %v, want %v", tt.name, tt.refusing, tt.inUse, tt.noSpace, got, tt.want)
		}
	}
}

func TestNeedsDefrag(t *testing.T) {
	const minFree = 64 << 20
	tests := []struct {
		name            string
		size, inUse     int64
		urgent, noSpace bool
		want            bool
	}{
		{name: "half free", size: 256 << 20, inUse: 128 << 20, want: true},
		{name: "less than half free", size: 256 << 20, inUse: 129 << 20, want: false},
		{name: "half free but under the minimum", size: 100 << 20, inUse: 50 << 20, want: false},
		{name: "urgent, the minimum free", size: 1 << 30, inUse: 1<<30 - minFree, urgent: true, want: true},
		{name: "urgent, under the minimum", size: 1 << 30, inUse: 1<<30 - minFree + 1, urgent: true, want: false},
		// CI: after a delete and a compaction under NOSPACE etcd still
		// reported 14.0 of 14.8 MB in use (no commit since), so the guard
		// never defragmented, never disarmed, and agents stayed refused.
		{name: "NOSPACE, nothing free by the figures", size: 14823424, inUse: 14028800, urgent: true, noSpace: true, want: true},
	}
	for _, tt := range tests {
		if got := needsDefrag(tt.size, tt.inUse, minFree, tt.urgent, tt.noSpace); got != tt.want {
			t.Errorf("%s: needsDefrag(size=%d, inUse=%d, urgent=%v, noSpace=%v) = %v, want %v", tt.name, tt.size, tt.inUse, tt.urgent, tt.noSpace, got, tt.want)
		}
	}
}
