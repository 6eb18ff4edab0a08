package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/agent/clusterstatus"
	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/protocol"
)

const testCluster = "member-1"

// waitTimeout bounds every wait for the agent in these tests; they pass in
// well under a second each, but the machine may be busy.
const waitTimeout = 20 * time.Second

func healthy(context.Context) error { return nil }

// fakeCluster is a fake member cluster with n Ready nodes of 8 CPUs.
func fakeCluster(n int) kubernetes.Interface {
	var objs []runtime.Object
	for i := range n {
		objs = append(objs, testNode(nodeName(i), true, "8", "32Gi", "110"))
	}
	client := fake.NewClientset(objs...)
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	return client
}

func nodeName(i int) string { return "node-" + string(rune('a'+i)) }

func testNode(name string, ready bool, cpu, memory, pods string) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
				corev1.ResourcePods:   resource.MustParse(pods),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

// newTestAgent returns an agent for cluster member-1 with certificates
// from p, reporting on client, dialing addr; change adjusts its Config.
func newTestAgent(t *testing.T, p *testPKI, addr string, client kubernetes.Interface, probe clusterstatus.Probe, change ...func(*Config)) *Agent {
	t.Helper()
	cfg := Config{Hub: addr, ClusterName: testCluster, CertDir: p.certDir(t, protocol.ClusterCommonName(testCluster)),
		StatusInterval: 300 * time.Millisecond, Version: "test", Logger: testLogger(t)}
	for _, f := range change {
		f(&cfg)
	}
	tlsConf, err := loadTLSConfig(cfg.withDefaults(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return newFakeAgent(t, cfg, tlsConf, client, probe)
}

// newFakeAgent assembles an agent on a fake member cluster: its Work engine
// starts on it but gets no Work.
func newFakeAgent(t *testing.T, cfg Config, tlsConf *tls.Config, client kubernetes.Interface, probe clusterstatus.Probe) *Agent {
	t.Helper()
	a, err := newAgent(cfg, tlsConf, kubeClients{kube: client, dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}, probe)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runningAgent is an agent running in the background of a test.
type runningAgent struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, once done is closed
}

// startAgent runs a until stop is called or the test ends.
func startAgent(t *testing.T, a *Agent) *runningAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &runningAgent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done // no goroutine of the agent outlives the test
	})
	return r
}

// wait returns Run's result, failing the test if Run does not return.
func (r *runningAgent) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %v", waitTimeout)
		return nil
	}
}

func TestAgentSession(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil)
	a := newTestAgent(t, p, hub.addr(), fakeCluster(3), healthy)
	run := startAgent(t, a)

	hello := hub.waitFor(t, "Hello", waitTimeout, isKind("hello"))
	wantHello := &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: testCluster, AgentVersion: "test", LeaseDurationSeconds: 40}
	if diff := cmp.Diff(wantHello, hello.hello); diff != "" {
		t.Errorf("Hello (-want +got):\n%s", diff)
	}
	// The session's first status report comes once (later ones only on
	// a change), so wait for it before the renewals, which keep coming.
	status := hub.waitFor(t, "ClusterStatus", waitTimeout, isKind("status")).status
	checkRenewals(t, hub, 3)
	if !status.APIServerHealthy || status.NodesReady != 3 || status.Allocatable["cpu"] != "24" {
		t.Errorf("status = %+v, want healthy with 3 Ready nodes and 24 CPUs", status)
	}

	first := hub.waitConn(t, waitTimeout)
	if err := first.send(&protocol.GoAway{Reason: "test rebalance"}); err != nil {
		t.Fatalf("hub GoAway: %v", err)
	}
	second := hub.waitReconnect(t, first, "the hub's GoAway")

	run.cancel()
	checkGoodbye(t, hub, second.id, run)
	if left := agentGoroutines(); len(left) > 0 {
		t.Errorf("goroutines left behind by Run: %v", left)
	}
	stats := a.Stats()
	if stats.Connected || stats.HubID != "test-hub" || stats.LastAck.IsZero() {
		t.Errorf("stats after shutdown = %+v, want disconnected from test-hub with an ack seen", stats)
	}
}

// agentGoroutines counts the goroutines running the agent's code. (The QUIC
// transport's socket reader is not counted: a test hub's closing transport
// could not be told apart from the agent's. dialHub's release waits for it.)
func agentGoroutines() map[string]int {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		panic(err)
	}
	counts := map[string]int{}
	for stack := range strings.SplitSeq(b.String(), "\n\n") {
		for _, frame := range []string{"agent.(*Agent)", "agent.(*session)", "clusterstatus.(*Collector)", "work.(*Engine)", "work.(*watcher)"} {
			if strings.Contains(stack, frame) {
				counts[frame]++
			}
		}
	}
	return counts
}

// checkRenewals waits for n renewals in a row and checks that their Seq
// increases.
func checkRenewals(t *testing.T, hub *testHub, n int) {
	t.Helper()
	var seqs []uint64
	for range n {
		seqs = append(seqs, hub.waitFor(t, "LeaseRenew", waitTimeout, isKind("renew")).renew.Seq)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("renewal sequence numbers %v do not increase", seqs)
			break
		}
	}
}

// checkGoodbye checks that, after the agent's context was cancelled, GoAway
// arrives on connection conn before it closes, and Run returns nil.
func checkGoodbye(t *testing.T, hub *testHub, conn int, run *runningAgent) {
	t.Helper()
	e := hub.waitFor(t, "GoAway or close", waitTimeout, func(e hubEvent) bool {
		return e.conn == conn && (e.kind == "goaway" || e.kind == "closed")
	})
	if e.kind != "goaway" {
		t.Fatalf("connection %d closed without GoAway", conn)
	}
	if diff := cmp.Diff(&protocol.GoAway{Reason: shutdownReason}, e.goAway); diff != "" {
		t.Errorf("GoAway (-want +got):\n%s", diff)
	}
	hub.waitFor(t, "connection close after GoAway", waitTimeout, func(e hubEvent) bool {
		return e.conn == conn && e.kind == "closed"
	})
	if err := run.wait(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestHandshakeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer protocol.Message
		check  func(error) bool
	}{
		{
			name:   "unauthorized",
			answer: &protocol.Error{Code: protocol.CodeUnauthorized, Message: "unknown cluster"},
			check:  func(err error) bool { return peerErrorCode(err) == protocol.CodeUnauthorized },
		},
		{
			name:   "unsupported version",
			answer: &protocol.Error{Code: protocol.CodeUnsupportedVersion},
			check:  func(err error) bool { return peerErrorCode(err) == protocol.CodeUnsupportedVersion },
		},
		{
			name:   "goaway",
			answer: &protocol.GoAway{Reason: "draining"},
			check:  func(err error) bool { var g *goAwayError; return errors.As(err, &g) && g.reason == "draining" },
		},
		{
			name:   "not a welcome",
			answer: &protocol.LeaseAck{Seq: 1, HubTime: time.Now()},
			check:  func(err error) bool { return errors.Is(err, errProtocol) },
		},
		{
			name: "newer protocol",
			answer: &protocol.Welcome{ProtocolVersion: protocol.Version + 1, HubID: "h", HubTime: time.Now(),
				LeaseDurationSeconds: 40, RenewIntervalMillis: 1000},
			check: func(err error) bool { return errors.Is(err, errProtocol) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPKI(t)
			hub := startTestHub(t, p.hubTLS(t), func(*protocol.Hello) protocol.Message { return tc.answer })
			a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy)
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			welcomedAt, err := a.runSession(ctx, nil)
			if err == nil || !welcomedAt.IsZero() || !tc.check(err) {
				t.Errorf("runSession = %v, %v; want an unwelcomed session and a matching error", welcomedAt, err)
			}
		})
	}
}

func peerErrorCode(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestSessionTLSFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		// certDir returns the agent's certificate folder; hub is the
		// hub's PKI.
		certDir func(t *testing.T, hub *testPKI) string
		want    string
	}{
		{
			name: "hub does not trust the agent",
			certDir: func(t *testing.T, hub *testPKI) string {
				dir := newTestPKI(t).certDir(t, protocol.ClusterCommonName(testCluster))
				writeFile(t, dir+"/"+credstore.CAFile, hub.ca.CertPEM())
				return dir
			},
			want: "the hub rejected this agent in the TLS handshake",
		},
		{
			name: "agent does not trust the hub",
			certDir: func(t *testing.T, hub *testPKI) string {
				dir := hub.certDir(t, protocol.ClusterCommonName(testCluster))
				writeFile(t, dir+"/"+credstore.CAFile, newTestPKI(t).ca.CertPEM())
				return dir
			},
			want: "TLS handshake with the hub failed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPKI(t)
			hub := startTestHub(t, p.hubTLS(t), nil)
			cfg := Config{Hub: hub.addr(), ClusterName: testCluster, CertDir: tc.certDir(t, p), Logger: discard}
			tlsConf, err := loadTLSConfig(cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			a := newFakeAgent(t, cfg, tlsConf, fakeCluster(1), healthy)
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			_, err = a.runSession(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("runSession error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRenewalsFollowTheAgentClock drives renewals and reports with a fake
// clock: each renewal carries the agent's time, and the next one waits for
// the clock to move by the hub's renew interval.
func TestRenewalsFollowTheAgentClock(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil) // renew interval 200ms
	// Early in the test certificate's life: a clock past 80 % of it would
	// (rightly) make the agent renew its certificate first, which this
	// test hub does not serve.
	t0 := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	clk := clocktesting.NewFakeClock(t0)
	a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy, func(cfg *Config) { cfg.Clock = clk })
	startAgent(t, a)

	var got []time.Time
	// The session's first status report comes once, among the renewals.
	var status *protocol.ClusterStatus
	for seq := uint64(1); seq <= 3; seq++ {
		e := hub.waitFor(t, "a renewal", waitTimeout, func(e hubEvent) bool {
			if e.kind == "status" {
				status = e.status
			}
			return e.kind == "renew"
		})
		if e.renew.Seq != seq {
			t.Fatalf("renewal %d has Seq %d", seq, e.renew.Seq)
		}
		got = append(got, e.renew.AgentTime.UTC())
		clk.Step(200 * time.Millisecond)
	}
	want := []time.Time{t0, t0.Add(200 * time.Millisecond), t0.Add(400 * time.Millisecond)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("renewal times (-want +got):\n%s", diff)
	}
	if status == nil {
		status = hub.waitFor(t, "ClusterStatus", waitTimeout, isKind("status")).status
	}
	if at := status.ObservedAt; at.Before(t0) || at.After(clk.Now()) {
		t.Errorf("status observed at %v, want a time of the agent's clock, in [%v, %v]", at, t0, clk.Now())
	}
}

// TestAgentRedialsAHubThatStopsAcking: a hub that keeps the connection but
// no longer acknowledges renewals is not renewing the lease; the agent must
// notice within a lease and redial rather than stay "connected".
func TestAgentRedialsAHubThatStopsAcking(t *testing.T) {
	p := newTestPKI(t)
	shortLease := func(*protocol.Hello) protocol.Message {
		return &protocol.Welcome{ProtocolVersion: protocol.Version, HubID: "test-hub", HubTime: time.Now(),
			LeaseDurationSeconds: 1, RenewIntervalMillis: 100}
	}
	hub := startTestHub(t, p.hubTLS(t), shortLease)
	a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy)
	run := startAgent(t, a)
	first := hub.waitConn(t, waitTimeout)
	hub.waitFor(t, "a renewal", waitTimeout, isKind("renew"))
	hub.muteAcks.Store(true)
	hub.waitReconnect(t, first, "renewals went unacknowledged")
	run.cancel()
	if err := run.wait(t); err != nil {
		t.Fatal(err)
	}
}

// TestAgentRenewalTransport: renewals go as datagrams to a hub that takes
// them and on the control stream to one that does not; both are acked.
func TestAgentRenewalTransport(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noDatagrams  bool
		wantDatagram bool
	}{
		{"hub with datagrams", false, true},
		{"hub without datagrams", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPKI(t)
			hub := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) { h.noDatagrams = tc.noDatagrams })
			a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy)
			startAgent(t, a)
			for range 3 {
				e := hub.waitFor(t, "a renewal", waitTimeout, isKind("renew"))
				if e.datagram != tc.wantDatagram {
					t.Fatalf("renewal %d came as a datagram: %v, want %v", e.renew.Seq, e.datagram, tc.wantDatagram)
				}
			}
			poll(t, waitTimeout, "an acknowledged renewal", func() bool { return !a.Stats().LastAck.IsZero() })
		})
	}
}

// TestCheckAcks: with no ack for a lease the session ends, except that with
// datagrams it takes datagramAckLeases leases, and a path that brought
// fewer than hubAlivePackets packets from the hub meanwhile is lossy, not
// a hub that stopped renewing.
func TestCheckAcks(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const lease = 4 * time.Second
	for _, tc := range []struct {
		name      string
		datagrams bool
		otherHubs bool
		sentAgo   time.Duration
		packets   uint64 // received since the oldest unacked renewal
		wantEnd   bool
	}{
		{"stream, acked within the lease", false, false, lease - time.Millisecond, 10, false},
		{"stream, no ack for a lease", false, false, lease, 0, true},
		{"datagrams, acked within the lease", true, false, lease - time.Millisecond, 10, false},
		{"datagrams, no ack for a lease though the hub's packets came: may be loss", true, false, lease, 20, false},
		{"datagrams, no ack, nothing came back: a lossy path", true, false, 3 * lease, hubAlivePackets - 1, false},
		{"datagrams, no ack for two leases though the hub's packets came", true, false, datagramAckLeases * lease, hubAlivePackets, true},
		{"datagrams, 16 renewals unacked, 7 packets: a lossy path", true, false, datagramAckLeases * lease, 7, false},
		{"datagrams, 16 renewals unacked, 8 packets: a wedged hub", true, false, datagramAckLeases * lease, 8, true},
		{"other replicas, nothing for a lease: this one is dead", true, true, lease, 0, true},
		{"other replicas, nothing for almost a lease", true, true, lease - time.Millisecond, 0, false},
		{"other replicas, a packet within the lease: alive", true, true, lease, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{datagrams: tc.datagrams, otherHubs: tc.otherHubs}
			s.pending.add(1, t0, 100)
			if strings.Contains(tc.name, "16 renewals") {
				for seq := uint64(2); seq <= 16; seq++ {
					s.pending.add(seq, t0.Add(time.Duration(seq)*time.Millisecond), 100)
				}
			}
			err := s.checkAcks(t0.Add(tc.sentAgo), lease, 100+tc.packets)
			if (err != nil) != tc.wantEnd || (err != nil && !errors.Is(err, errNoLeaseAck)) {
				t.Errorf("checkAcks: %v, want the session ended: %v", err, tc.wantEnd)
			}
		})
	}
}

// TestRenewalRetries: with datagrams, a renewal not acknowledged within a
// quarter of the renew interval is followed by a fresh one, and for a
// lease after that renewals go every quarter interval; then only the
// regular ones.
func TestRenewalRetries(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) { h.muteAcks.Store(true) }) // interval 200ms, lease 40s
	t0 := time.Now().UTC().Truncate(time.Second).Add(time.Minute)
	clk := clocktesting.NewFakeClock(t0)
	a := newTestAgent(t, p, hub.addr(), fakeCluster(1), healthy, func(cfg *Config) { cfg.Clock = clk })
	startAgent(t, a)
	const quarter, lease = 50 * time.Millisecond, 40 * time.Second
	renewal := func(wantSeq uint64, wantAt time.Time) {
		t.Helper()
		e := hub.waitFor(t, fmt.Sprintf("renewal %d", wantSeq), waitTimeout, isKind("renew"))
		if e.renew.Seq != wantSeq || !e.renew.AgentTime.Equal(wantAt) || !e.datagram {
			t.Fatalf("renewal %d at %v (datagram %v), want %d at %v", e.renew.Seq, e.renew.AgentTime, e.datagram, wantSeq, wantAt)
		}
	}
	// The agent stamps an ack with its (fake) clock: the current time
	// once the renewal sent at it is acknowledged.
	acked := func(what string) {
		t.Helper()
		poll(t, waitTimeout, what+" acknowledged", func() bool { return a.Stats().LastAck.Equal(clk.Now()) })
	}
	renewal(1, t0)
	clk.Step(quarter)
	renewal(2, t0.Add(quarter)) // unacknowledged: a fresh one
	clk.Step(quarter)
	renewal(3, t0.Add(2*quarter))
	hub.muteAcks.Store(false)
	clk.Step(quarter)
	renewal(4, t0.Add(3*quarter)) // the last one that went unanswered
	acked("renewal 4")
	clk.Step(quarter)
	renewal(5, t0.Add(4*quarter)) // regular
	acked("renewal 5")
	clk.Step(quarter)
	renewal(6, t0.Add(5*quarter)) // still every quarter: within a lease of the loss
	acked("renewal 6")
	clk.Step(lease)
	later := t0.Add(5*quarter + lease)
	renewal(7, later) // regular (overdue); the lossy lease is over
	acked("renewal 7")
	for range 4 {
		clk.Step(quarter)
	}
	renewal(8, later.Add(4*quarter)) // nothing between the regular ones
}
