package agentserver

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// TestClaimReplacesOlderSessions: a new session of a cluster replaces
// that cluster's session, and no session of another; a session that
// fails to start gives its cluster back, and releasing a replaced session
// leaves the newer one live.
func TestClaimReplacesOlderSessions(t *testing.T) {
	s := &agentServer{sessions: map[string]*agentSession{}}
	a1 := &agentSession{id: "1", cluster: "a"}
	b1 := &agentSession{id: "2", cluster: "b"}
	a2 := &agentSession{id: "3", cluster: "a"}
	tests := []struct {
		sess *agentSession
		want *agentSession
	}{{a1, nil}, {b1, nil}, {a2, a1}}
	for _, tt := range tests {
		if got := s.claim(tt.sess); got != tt.want {
			t.Errorf("claim(%s) replaced %v, want %v", tt.sess.id, got, tt.want)
		}
	}
	live := func() map[string]string {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := map[string]string{}
		for cluster, sess := range s.sessions {
			out[cluster] = sess.id
		}
		return out
	}
	if diff := cmp.Diff(map[string]string{"a": "3", "b": "2"}, live()); diff != "" {
		t.Errorf("live sessions after the claims (-want +got):\n%s", diff)
	}
	a3 := &agentSession{id: "4", cluster: "a"}
	s.unclaim(a3, s.claim(a3))
	s.release(a1) // replaced long ago: a2 stays
	if diff := cmp.Diff(map[string]string{"a": "3", "b": "2"}, live()); diff != "" {
		t.Errorf("live sessions after a failed start and a late release (-want +got):\n%s", diff)
	}
	c1 := &agentSession{id: "5", cluster: "c"}
	s.unclaim(c1, s.claim(c1))
	s.release(b1)
	if diff := cmp.Diff(map[string]string{"a": "3"}, live()); diff != "" {
		t.Errorf("live sessions after the releases (-want +got):\n%s", diff)
	}
}

// BenchmarkClaim claims sessions of 20,000 clusters, as a fleet
// connecting does.
func BenchmarkClaim(b *testing.B) {
	names := make([]string, 20000)
	for i := range names {
		names[i] = fmt.Sprintf("load-%05d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := &agentServer{sessions: map[string]*agentSession{}}
		for _, name := range names {
			s.claim(&agentSession{cluster: name})
		}
	}
}

// TestRenewalsBeyondTheRateAreNotStamped renews 200 times at once: the
// burst is stamped, the rest acknowledged with the last stamp and counted.
func TestRenewalsBeyondTheRateAreNotStamped(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	backend := &countingBackend{clock: clk}
	s := &agentServer{backend: backend, limits: defaultSessionLimits()}
	sess := &agentSession{cluster: "edge-1", limits: s.limits.forSession()}
	for i := range 200 {
		stamp, err := s.renewLease(sess, "192.0.2.1:1", &protocol.LeaseRenew{Seq: uint64(i), AgentTime: clk.Now()})
		if err != nil || stamp.IsZero() {
			t.Fatalf("renewal %d: %v, %v", i, stamp, err)
		}
	}
	stamped := backend.renewed()
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
	backend := &countingBackend{clock: clk}
	s := &agentServer{backend: backend, logger: slog.New(slog.NewTextHandler(t.Output(), nil)), limits: defaultSessionLimits()}
	s.limits.reports, s.limits.reportBurst = rate.Every(20*time.Millisecond), 1
	sess := &agentSession{cluster: "edge-1", limits: s.limits.forSession()}
	reports := newReportPacer(sess.limits.reports, func(report *protocol.ClusterStatus) {
		if err := s.backend.Status(sess.cluster, report); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(reports.stop)

	replaced := 0
	for i := 1; i <= 100; i++ {
		if reports.put(&protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, KubernetesVersion: fmt.Sprintf("v1.%d", i)}) {
			replaced++
		}
	}
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return backend.lastVersion() == "v1.100", nil
	})
	if err != nil {
		t.Fatalf("the newest report was not applied: %v (version %q)", err, backend.lastVersion())
	}
	applied := backend.reported()
	if applied+int64(replaced) != 100 || applied > 50 {
		t.Errorf("%d reports applied, %d replaced; want them to add up to 100, most replaced", applied, replaced)
	}
}

// TestReportPacerStop: a report waiting for its turn is dropped when the
// status stream ends, and nothing is applied after.
func TestReportPacerStop(t *testing.T) {
	var applied []string
	p := newReportPacer(rate.NewLimiter(rate.Every(time.Hour), 1), func(r *protocol.ClusterStatus) { applied = append(applied, r.KubernetesVersion) })
	for _, v := range []string{"v1.1", "v1.2", "v1.3"} {
		p.put(&protocol.ClusterStatus{KubernetesVersion: v})
	}
	p.stop()
	if p.put(&protocol.ClusterStatus{KubernetesVersion: "v1.4"}) {
		t.Error("a put after stop replaced a report")
	}
	p.fire() // a timer that fired as it was stopped
	if diff := cmp.Diff([]string{"v1.1"}, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

// countingBackend is an agent backend that knows every cluster, stamps
// renewals with its clock and counts what it was told.
type countingBackend struct {
	clock clock.PassiveClock

	mu                  sync.Mutex
	renewals, reports   int64
	lastReportedVersion string
}

func (b *countingBackend) CheckCertificate(context.Context, string, *big.Int) error   { return nil }
func (b *countingBackend) ConfirmCertificate(context.Context, string, *big.Int) error { return nil }
func (b *countingBackend) CertificateInUse(context.Context, string, *big.Int) error   { return nil }
func (b *countingBackend) Connect(context.Context, *protocol.Hello, string, string, string) error {
	return nil
}
func (b *countingBackend) Disconnect(string, string, string)      {}
func (b *countingBackend) DropSession(string, string)             {}
func (b *countingBackend) SessionReplaced(string, string, string) {}

func (b *countingBackend) Renew(string, string, time.Time) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.renewals++
	return b.clock.Now(), nil
}

func (b *countingBackend) Status(_ string, report *protocol.ClusterStatus) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reports++
	b.lastReportedVersion = report.KubernetesVersion
	return nil
}

func (b *countingBackend) renewed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.renewals
}

func (b *countingBackend) reported() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reports
}

func (b *countingBackend) lastVersion() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastReportedVersion
}
