package hub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// TestClaimReplacesOlderSessions: a new session of a cluster replaces
// every other session of that cluster, and no session of another.
func TestClaimReplacesOlderSessions(t *testing.T) {
	s := &agentServer{sessions: map[*agentSession]struct{}{}}
	a1 := &agentSession{id: "1", cluster: "a"}
	b1 := &agentSession{id: "2", cluster: "b"}
	a2 := &agentSession{id: "3", cluster: "a"}
	tests := []struct {
		sess *agentSession
		want []string
	}{{a1, nil}, {b1, nil}, {a2, []string{"1"}}}
	for _, tt := range tests {
		var got []string
		for _, old := range s.claim(tt.sess) {
			got = append(got, old.id)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("claim(%s) replaced %v, want %v", tt.sess.id, got, tt.want)
		}
	}
	if n := s.sessionCount(); n != 2 {
		t.Errorf("%d sessions live, want one per cluster", n)
	}
	// A session that fails to start gives its cluster back to the one it
	// would have replaced.
	a3 := &agentSession{id: "4", cluster: "a"}
	s.unclaim(a3, s.claim(a3))
	s.mu.Lock()
	_, kept := s.sessions[a2]
	s.mu.Unlock()
	if !kept || s.sessionCount() != 2 {
		t.Errorf("after a failed start: a2 live %v, %d sessions; want a2 and b1", kept, s.sessionCount())
	}
}

// TestRenewalsBeyondTheRateAreNotStamped renews 200 times at once: the
// burst is stamped, the rest acknowledged with the last stamp and counted.
func TestRenewalsBeyondTheRateAreNotStamped(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	s := &agentServer{registry: f.reg, limits: defaultSessionLimits()}
	sess := &agentSession{cluster: "edge-1", limits: s.limits.forSession()}
	before := f.reg.stats.renewals.Load()
	for i := range 200 {
		stamp, err := s.renewLease(sess, "192.0.2.1:1", &protocol.LeaseRenew{Seq: uint64(i), AgentTime: clk.Now()})
		if err != nil || stamp.IsZero() {
			t.Fatalf("renewal %d: %v, %v", i, stamp, err)
		}
	}
	stamped := f.reg.stats.renewals.Load() - before
	// The limiter runs on real time: a slow machine may refill a few.
	if stamped < renewalBurst || stamped > renewalBurst+5 {
		t.Errorf("%d renewals stamped, want about the burst %d", stamped, renewalBurst)
	}
	if limited := s.limits.limitedRenewals.Load(); limited != 200-stamped {
		t.Errorf("%d renewals counted as limited, want %d", limited, 200-stamped)
	}
}

// TestStatusReportsCoalesced puts 100 reports at once: they are applied
// at the session's pace, the newest wins and most are never applied.
func TestStatusReportsCoalesced(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	s := &agentServer{registry: f.reg, logger: f.reg.logger, limits: defaultSessionLimits()}
	s.limits.reports, s.limits.reportBurst = rate.Every(20*time.Millisecond), 1
	sess := &agentSession{cluster: "edge-1", limits: s.limits.forSession()}
	reports := newLatestReport()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); s.applyReports(ctx, sess, reports) }()
	t.Cleanup(func() { cancel(); <-done })

	before := f.reg.stats.statusReports.Load()
	replaced := 0
	for i := 1; i <= 100; i++ {
		if reports.put(&protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, KubernetesVersion: fmt.Sprintf("v1.%d", i)}) {
			replaced++
		}
	}
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.cluster("edge-1").Status.KubernetesVersion == "v1.100", nil
	})
	if err != nil {
		t.Fatalf("the newest report was not applied: %v (version %q)", err, f.cluster("edge-1").Status.KubernetesVersion)
	}
	applied := f.reg.stats.statusReports.Load() - before
	if applied+int64(replaced) != 100 || applied > 50 {
		t.Errorf("%d reports applied, %d replaced; want them to add up to 100, most replaced", applied, replaced)
	}
}
