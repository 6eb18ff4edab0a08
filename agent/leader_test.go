package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// replica is an agent process's Run in the background of a test.
type replica struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result once done is closed
	http   string
}

// startReplica runs Run(cfg) as replica name, with its HTTP endpoints on a
// port of its own, until stopped or the test ends.
func startReplica(t *testing.T, name string, cfg Config) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &replica{name: name, cancel: cancel, done: make(chan struct{})}
	listening := make(chan string, 1)
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.onHTTP = func(addr net.Addr) { listening <- addr.String() }
	cfg.Logger = testLogger(t).With("replica", name)
	go func() {
		defer close(r.done)
		r.err = Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	select {
	case r.http = <-listening:
	case <-r.done:
		t.Fatalf("replica %s: Run = %v before it listened", name, r.err)
	case <-time.After(waitTimeout):
		t.Fatalf("replica %s does not listen", name)
	}
	return r
}

// wait returns Run's result, failing the test if it does not return
// within timeout.
func (r *replica) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("replica %s: Run did not return within %v", r.name, timeout)
		return nil
	}
}

// get returns the status code and body of GET path on the replica.
func (r *replica) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.http + path)
	if err != nil {
		t.Fatalf("replica %s: GET %s: %v", r.name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// metric returns the value of series (name and labels exactly as
// exposed) on the replica's /metrics, or -1 if it is not there.
func (r *replica) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, body := r.get(t, "/metrics")
	for line := range strings.Lines(body) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return -1
}

// poll checks cond every 20 ms until it holds, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// configMapWork is a Work with one ConfigMap; kind "Nonsense" makes it
// fail.
func configMapWork(t *testing.T, name, kind string) *protocol.WorkUpsert {
	t.Helper()
	manifest, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "default"}, "data": map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.WorkUpsert{Name: name, Generation: 1, Binding: "default/" + name, Manifests: []json.RawMessage{manifest}}
}

// TestLeaderElection runs two replicas of the agent with leader election
// and a credential Secret on a real member cluster: the first leads,
// joins and holds the only hub session, with its HTTP endpoints showing
// it; the second stands by, ready; when the leader stops, its session
// ends before the standby's begins, with the same certificate and no new
// join, and the Works' inventory; a leader that cannot renew its Lease
// stops its session and Run returns errLostLeadership.
func TestLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	cluster := env.Clusters()[0]
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil, func(h *testHub) {
		h.join = func(_ int, req *protocol.JoinRequest) protocol.Message { return issued(t, p, nil, req) }
	})
	cfg := Config{Hub: hub.addr(), ClusterName: cluster.Name, Kubeconfig: cluster.Kubeconfig, CertSecret: testSecret,
		BootstrapToken: testToken, HubCAHash: pki.Pin(p.ca.Cert), StatusInterval: 300 * time.Millisecond, Version: "test",
		LeaderElection: LeaderElection{Enabled: true, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}}

	a := startReplica(t, "a", cfg)
	hub.waitFor(t, "a join", clusterWait, isKind("join"))
	first := hub.waitConn(t, clusterWait)
	b := startReplica(t, "b", cfg)
	poll(t, waitTimeout, "both replicas ready", func() bool {
		codeA, _ := a.get(t, "/readyz")
		codeB, _ := b.get(t, "/readyz")
		return codeA == http.StatusOK && codeB == http.StatusOK
	})
	for _, c := range []struct {
		r      *replica
		series string
		want   float64
	}{
		{a, "flotilla_agent_leader", 1}, {a, "flotilla_agent_hub_connected", 1}, {a, "flotilla_agent_hub_session_starts_total", 1},
		{b, "flotilla_agent_leader", 0}, {b, "flotilla_agent_hub_connected", 0}, {b, "flotilla_agent_hub_session_starts_total", 0},
		{a, "flotilla_agent_leader_election_enabled", 1}, {a, "flotilla_agent_fenced_works", 0},
	} {
		if got := c.r.metric(t, c.series); got != c.want {
			t.Errorf("replica %s: %s = %v, want %v", c.r.name, c.series, got, c.want)
		}
	}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		if code, body := b.get(t, path); code != http.StatusOK {
			t.Errorf("standby %s = %d %s", path, code, body)
		}
	}

	// The leader's measurements move: renewals, applies, its requests.
	rtt := a.metric(t, "flotilla_agent_lease_renewal_rtt_seconds_count")
	poll(t, waitTimeout, "more acknowledged renewals", func() bool {
		return a.metric(t, "flotilla_agent_lease_renewal_rtt_seconds_count") > rtt
	})
	waitWork[*protocol.WorkInventory](t, hub, first.id, "the inventory", clusterWait, nil)
	for _, w := range []*protocol.WorkUpsert{configMapWork(t, "good", "ConfigMap"), configMapWork(t, "bad", "Nonsense")} {
		if err := first.sendWork(w); err != nil {
			t.Fatal(err)
		}
		applied := waitWork(t, hub, first.id, "WorkApplied of "+w.Name, clusterWait, func(m *protocol.WorkApplied) bool { return m.Name == w.Name })
		if applied.Applied != (w.Name == "good") {
			t.Errorf("WorkApplied %+v", applied)
		}
	}
	poll(t, waitTimeout, "the apply metrics", func() bool {
		return a.metric(t, "flotilla_agent_work_applies_total") >= 2 && a.metric(t, "flotilla_agent_work_apply_failures_total") >= 1 &&
			a.metric(t, "flotilla_agent_work_apply_duration_seconds_count") >= 2
	})
	if got := a.metric(t, `rest_client_requests_total{code="200",host="`+strings.TrimPrefix(mustRESTHost(t, cluster), "https://")+`",method="GET"}`); got <= 0 {
		t.Errorf("rest_client_requests_total of GETs = %v, want some", got)
	}

	// The leader stops: its session ends, then the standby's begins.
	stoppedAt := time.Now()
	a.cancel()
	if err := a.wait(t, waitTimeout); err != nil {
		t.Errorf("leader's Run = %v, want nil", err)
	}
	hub.waitFor(t, "the leader's GoAway", waitTimeout, func(e hubEvent) bool {
		if e.kind == "hello" && e.conn != first.id {
			t.Errorf("the standby said Hello (connection %d) before the leader's GoAway: two sessions at once", e.conn)
		}
		return e.kind == "goaway" && e.conn == first.id
	})
	select {
	case <-first.conn.Context().Done():
	default:
		t.Error("the leader's connection is open after its Run returned")
	}
	second := hub.waitConn(t, clusterWait)
	t.Logf("standby connected %v after the leader was stopped", time.Since(stoppedAt).Round(time.Millisecond))
	if peerSerial(second) != peerSerial(first) || hub.joins.Load() != 1 {
		t.Errorf("the new leader connected with certificate %s after %d joins, want the joined %s after 1", peerSerial(second), hub.joins.Load(), peerSerial(first))
	}
	inv := waitWork[*protocol.WorkInventory](t, hub, second.id, "the new leader's inventory", clusterWait, nil)
	if len(inv.Works) != 1 || inv.Works[0].Name != "good" {
		t.Errorf("the new leader's inventory = %+v, want the good Work", inv.Works)
	}
	poll(t, waitTimeout, "the new leader's metrics", func() bool {
		return b.metric(t, "flotilla_agent_leader") == 1 && b.metric(t, "flotilla_agent_hub_connected") == 1
	})
	if got := b.metric(t, "flotilla_agent_work_applies_total"); got != 0 {
		t.Errorf("the new leader applied %v times, want none", got)
	}

	// The member cluster's API server goes: the leader cannot renew.
	if err := cluster.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.StartAPIServer(context.Background()); err != nil {
			t.Errorf("restart the API server: %v", err)
		}
	})
	if err := b.wait(t, cfg.LeaderElection.LeaseDuration+waitTimeout); !errors.Is(err, errLostLeadership) {
		t.Errorf("Run of the leader that cannot renew = %v, want %v", err, errLostLeadership)
	}
	hub.waitFor(t, "the GoAway of the leader that lost the lead", waitTimeout, func(e hubEvent) bool { return e.kind == "goaway" && e.conn == second.id })
}

// mustRESTHost is the member cluster's API server address as client-go
// labels its requests.
func mustRESTHost(t *testing.T, c *membercluster.Cluster) string {
	t.Helper()
	rc, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	return rc.Host
}
