package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/promcheck"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestHostileAgent attacks the hub as a hostile member cluster would, with
// one valid agent certificate, at a small scale of the attacks seen on the
// hub before its limits (figures in the subtests): many sessions with one
// certificate, a flapping clock, an implausible resource report and
// oversized Work status reports. Throughout, an honest agent's cluster
// stays Ready, and at the end its health changes are still stored.
func TestHostileAgent(t *testing.T) {
	f := startFleet(t, 1, "--store-check-interval=1s")
	top := t
	h := f.hub
	rogueTLS := loadClientTLS(t, h.issueCert(t, "rogue"), "127.0.0.1")
	honestReady := func(t *testing.T, when string) {
		t.Helper()
		if c := h.cluster(t, "member-1"); readyOf(c) != metav1.ConditionTrue || len(c.Spec.Taints) > 0 {
			t.Errorf("%s: the honest member-1 is %s, want Ready without taints", when, describe(c))
		}
	}

	// Before: 50 sessions with one certificate all stayed open, and the
	// newest silently took the Work stream.
	var rogue *rogueAgent
	t.Run("50 sessions with one certificate leave one open", func(t *testing.T) {
		const sessions = 50
		all := make([]*rogueAgent, sessions)
		for i := range all {
			all[i] = dialRogue(t, top, h.quicAddr, rogueTLS, "rogue")
		}
		waitFor(t, 30*time.Second, "all but the newest session told to go away", func() (bool, string) {
			gone := 0
			for _, r := range all[:sessions-1] {
				if strings.Contains(r.endReason(), "replaced by a newer session of cluster rogue") {
					gone++
				}
			}
			return gone == sessions-1, fmt.Sprintf("%d of %d replaced", gone, sessions-1)
		})
		rogue = all[sessions-1]
		if reason := rogue.endReason(); reason != "" {
			t.Fatalf("the newest session was ended too: %s", reason)
		}
		t.Logf("a replaced session was told: %s", all[0].endReason())
		metrics := h.metrics(t)
		for _, want := range []string{fmt.Sprintf("flotilla_sessions_replaced_total %d", sessions-1), "flotilla_connected_agents 2"} {
			if !strings.Contains(metrics, want+"\n") {
				t.Errorf("metrics lack %q", want)
			}
		}
		if n := eventCount(t, h, v1alpha1.KindCluster, "default", "rogue", "SessionReplaced"); n < 1 || n > 6 {
			t.Errorf("%d SessionReplaced events, want between 1 and 6 (bounded per reason)", n)
		}
		t.Logf("after: %d sessions with one certificate, 1 open, %d replaced; metrics: %s", sessions, sessions-1, grepMetrics(metrics, "flotilla_sessions_replaced_total", "flotilla_connected_agents"))
	})
	if rogue == nil {
		t.FailNow()
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go rogue.keepRenewing(ctx)
	rogue.report(t, plausibleReport())
	waitReady(t, h, "rogue", 30*time.Second)

	// Before: 1,000 renewals with a flapping clock left 506 events.
	t.Run("a flapping clock writes a bounded number of events", func(t *testing.T) {
		const renewals = 1000
		for i := range renewals {
			skew := time.Duration(0)
			if i%2 == 1 {
				skew = 10 * time.Second
			}
			if err := rogue.renew(time.Now().Add(skew)); err != nil {
				t.Fatalf("renewal %d: %v", i, err)
			}
		}
		waitFor(t, 10*time.Second, "ClockSynced False on rogue", func() (bool, string) {
			cond := meta.FindStatusCondition(h.cluster(t, "rogue").Status.Conditions, v1alpha1.ClusterConditionClockSynced)
			return cond != nil && cond.Status == metav1.ConditionFalse, fmt.Sprintf("%+v", cond)
		})
		skewed := eventCount(t, h, v1alpha1.KindCluster, "default", "rogue", v1alpha1.ReasonClockSkewed)
		all := allEvents(t, h, "rogue")
		if skewed < 1 || skewed > 3 {
			t.Errorf("%d ClockSkewed events for %d flapping renewals, want 1 to 3", skewed, renewals)
		}
		if all > 40 {
			t.Errorf("%d events about rogue in all, want at most 40", all)
		}
		t.Logf("after: %d flapping renewals → %d ClockSkewed events (%d about rogue in all); %s", renewals, skewed, all,
			grepMetrics(h.metrics(t), "flotilla_lease_renewals_limited_total", "flotilla_events_suppressed_total"))
		honestReady(t, "after the flapping clock")
	})

	// Before: a report of 100,000 CPUs pulled a dynamically weighted
	// workload onto that cluster.
	t.Run("an implausible report is refused and attracts nothing", func(t *testing.T) {
		huge := plausibleReport()
		huge.NodesTotal, huge.NodesReady = 1, 1
		huge.Allocatable = map[string]string{"cpu": "100000", "memory": "96Gi", "pods": "330"}
		rogue.report(t, huge)
		waitFor(t, 10*time.Second, "ResourcesPlausible False on rogue", func() (bool, string) {
			c := h.cluster(t, "rogue")
			cond := meta.FindStatusCondition(c.Status.Conditions, "ResourcesPlausible")
			return cond != nil && cond.Status == metav1.ConditionFalse && c.Status.ResourceSummary == nil, fmt.Sprintf("%+v, summary %v", cond, c.Status.ResourceSummary)
		})
		f.apply("batch.yaml", batchYAML(4))
		waitFor(t, 30*time.Second, "batch placed", func() (bool, string) {
			b := f.binding("capacity", "batch-deployment")
			if b == nil {
				return false, "no binding yet"
			}
			cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionScheduled)
			return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == b.Generation, fmt.Sprintf("%+v", b.Spec.Clusters)
		})
		placed := f.binding("capacity", "batch-deployment").Spec.Clusters
		if len(placed) != 1 || placed[0].Name != "member-1" || placed[0].Replicas != 4 {
			t.Errorf("placement %+v, want all 4 replicas on member-1 and none on the cluster claiming 100,000 CPUs", placed)
		}
		if n := eventCount(t, h, v1alpha1.KindCluster, "default", "rogue", "ImplausibleResourceReport"); n != 1 {
			t.Errorf("%d ImplausibleResourceReport events, want 1", n)
		}
		honestReady(t, "after the implausible report")
	})

	// Before: ~55 MiB of oversized Work status grew the store by 56 MiB
	// (and 14 MiB reports for four minutes filled its 2 GiB quota).
	t.Run("oversized Work status grows the store by a bounded amount", func(t *testing.T) {
		f.apply("probe.yaml", probeYAML)
		work := rogue.takeWork(t)
		namespace := v1alpha1.ExecutionNamespace("rogue")
		waitFor(t, 30*time.Second, "the hub records the rogue's Work applied", func() (bool, string) {
			var w v1alpha1.Work
			code := h.getJSON(t, "/apis/flotilla.io/v1alpha1/namespaces/"+namespace+"/works/"+work.Name, &w)
			return code == http.StatusOK && w.Status.ObservedGeneration == work.Generation, fmt.Sprintf("%d %+v", code, w.Status)
		})
		before := storeSize(t, h)
		sent, reports := 0, 0
		deadline := time.Now().Add(10 * time.Second)
		for ; time.Now().Before(deadline); reports++ {
			sent += rogue.sendWorkStatus(t, work, reports, 60, 15<<10)
		}
		last := fmt.Sprintf("report %d", reports-1)
		var stored v1alpha1.Work
		waitFor(t, 30*time.Second, "the last report stored", func() (bool, string) {
			h.getJSON(t, "/apis/flotilla.io/v1alpha1/namespaces/"+namespace+"/works/"+work.Name, &stored)
			ms := stored.Status.ManifestStatuses
			return len(ms) > 0 && ms[0].Message == last, fmt.Sprintf("%d manifests stored", len(ms))
		})
		growth := storeSize(t, h) - before
		raw, err := json.Marshal(stored.Status.ManifestStatuses)
		if err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(stored.Status.Conditions, "StatusTruncated")
		if len(raw) > 64<<10 || cond == nil || !strings.Contains(cond.Message, "status fields of") {
			t.Errorf("stored status is %d bytes (limit 64 KiB), StatusTruncated %+v", len(raw), cond)
		}
		if growth > 8<<20 {
			t.Errorf("the store grew by %.1f MiB for %.1f MiB of reports, want at most 8 MiB", mib(growth), mib(int64(sent)))
		}
		t.Logf("after: %d reports, %.1f MiB sent → store +%.1f MiB; stored status %d bytes; %s", reports, mib(int64(sent)), mib(growth), len(raw),
			grepMetrics(h.metrics(t), "flotilla_work_reports_coalesced_total", "flotilla_work_reports_truncated_total", "flotilla_store_db_size_bytes"))
		honestReady(t, "after the oversized reports")
	})

	// Before: ~1 MiB of served APIs (900 group versions) five times a
	// second, with the resources changing each time, for 30 s: every
	// report rewrote the whole Cluster, and the store grew by 34.6 MiB.
	// Such a list is now refused whole (a Cluster stores 512 KiB of
	// APIs); this one is just under that, so the pace is what bounds it.
	t.Run("bulky status reports five times a second grow the store by at most 5 MiB", func(t *testing.T) {
		before := storeSize(t, h)
		sent, reports := 0, 0
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for ; time.Now().Before(deadline); reports++ {
			sent += rogue.report(t, bulkyReport(reports))
			<-ticker.C
		}
		// The last report may be held back by the pacing: it is stored
		// once the pace allows, with no further report.
		last := strconv.Itoa(bulkyPods(reports - 1))
		waitFor(t, time.Minute, "the last report stored", func() (bool, string) {
			c := h.cluster(t, "rogue")
			if c.Status.ResourceSummary == nil {
				return false, "no resource summary"
			}
			got := c.Status.ResourceSummary.Allocated[corev1.ResourcePods]
			return got.String() == last, "allocated pods " + got.String()
		})
		growth := storeSize(t, h) - before
		if growth > 5<<20 {
			t.Errorf("the store grew by %.1f MiB for %.1f MiB of reports, want at most 5 MiB", mib(growth), mib(int64(sent)))
		}
		t.Logf("after: %d reports, %.1f MiB sent in 30 s → store +%.1f MiB; %s", reports, mib(int64(sent)), mib(growth),
			grepMetrics(h.metrics(t), "flotilla_store_db_size_bytes", "flotilla_status_changes_coalesced_total", "flotilla_served_apis_coalesced_total"))
		honestReady(t, "after the bulky reports")
	})

	t.Run("a 14 MiB frame from an agent ends its session", func(t *testing.T) {
		err := rogue.sendFrame(14<<20, protocol.TypeWorkStatus)
		<-rogue.conn.Context().Done()
		if said := rogue.endReason(); !strings.Contains(said, "frame too large") {
			t.Errorf("session ended with %s (write: %v), want the hub to say the frame is too large", said, err)
		}
	})

	t.Run("renewal datagrams are paced; a bad datagram ends the session", func(t *testing.T) {
		r := dialRogue(t, t, h.quicAddr, rogueTLS, "rogue")
		if !r.conn.ConnectionState().SupportsDatagrams.Remote {
			t.Fatal("the hub does not take QUIC datagrams")
		}
		before := promcheck.Value(scrapeHub(t, h), "flotilla_lease_renewals_limited_total", nil)
		const flood = 2000
		for i := range flood {
			if err := protocol.SendDatagram(r.conn, &protocol.LeaseRenew{Seq: uint64(i + 1), AgentTime: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		b, err := r.conn.ReceiveDatagram(ctx)
		if err != nil {
			t.Fatalf("no ack datagram: %v", err)
		}
		if m, err := protocol.DecodeDatagram(b); err != nil || m.Type() != protocol.TypeLeaseAck {
			t.Fatalf("the hub answered a renewal datagram with %v (%v), want a LeaseAck", m, err)
		}
		// Datagrams beyond QUIC's queues are dropped; those the hub read
		// beyond the session's rate were acknowledged, not stamped.
		waitFor(t, 10*time.Second, "the flood counted as limited renewals", func() (bool, string) {
			limited := promcheck.Value(scrapeHub(t, h), "flotilla_lease_renewals_limited_total", nil) - before
			return limited > 0, fmt.Sprintf("%v limited", limited)
		})
		honestReady(t, "after a flood of renewal datagrams")
		if err := r.conn.SendDatagram([]byte("\x00\x00\x00\x03\x01{}")); err != nil {
			t.Fatal(err)
		}
		<-r.conn.Context().Done()
		if said := r.endReason(); !strings.Contains(said, protocol.CodeBadMessage) {
			t.Errorf("a Hello in a datagram ended the session with %q, want %s", said, protocol.CodeBadMessage)
		}
	})

	// Before: join attempts were unlimited, so bootstrap tokens could be
	// guessed as fast as the hub answered; then one token ID could be
	// tried again and again from as many addresses as an attacker had.
	t.Run("join attempts are limited per token and per source address", func(t *testing.T) {
		const attempts = 45
		codes := map[string]int{}
		var locked, limited string
		for i := range attempts {
			token := "abcdef.0123456789abcdef" // one ID, guessing its secret
			if i > tokenLockoutFailures {
				token = fmt.Sprintf("g%05d.0123456789abcdef", i) // then other IDs
			}
			e := guessJoin(t, h.quicAddr, "127.0.0.1", token)
			codes[e.Code]++
			switch {
			case i < tokenLockoutFailures && e.Code != protocol.CodeTokenRefused:
				t.Errorf("guess %d answered %s %q, want %s", i, e.Code, e.Message, protocol.CodeTokenRefused)
			case i == tokenLockoutFailures:
				locked = e.Message
			case e.Code == protocol.CodeRateLimited:
				limited = e.Message
			}
		}
		if !strings.Contains(locked, "bootstrap token abcdef failed 5 joins") {
			t.Errorf("the 6th guess of one token ID was answered %q, want it locked out", locked)
		}
		if codes[protocol.CodeTokenRefused] < 5 || codes[protocol.CodeTokenRefused] > 40 || codes[protocol.CodeRateLimited] < 5 {
			t.Errorf("answers to %d guessed joins: %v; want the first refused for their token, then rate limited", attempts, codes)
		}
		if !strings.Contains(limited, "too many join attempts from 127.0.0.1") {
			t.Errorf("rate-limited answer %q, want it to name the address", limited)
		}
		t.Logf("after: %d guessed joins from one address → %v", attempts, codes)
	})

	// Before: a guesser with many addresses had a budget per address.
	t.Run("failed joins spend one budget for the whole hub", func(t *testing.T) {
		failed, refusedAt := 0, 0
		var refusal string
		for i := 0; refusal == "" && i < 300; i++ {
			source := fmt.Sprintf("127.0.0.%d", 2+i/25) // fewer than 30 guesses each: no source is limited
			e := guessJoin(t, h.quicAddr, source, fmt.Sprintf("b%05d.0123456789abcdef", i))
			switch {
			case e.Code == protocol.CodeTokenRefused:
				failed++
			case strings.Contains(e.Message, "too many failed joins on this hub"):
				refusal, refusedAt = e.Message, i
			default:
				t.Fatalf("guess %d from %s answered %s %q", i, source, e.Code, e.Message)
			}
		}
		// The budget is 60 failures; the ones of the subtest before and
		// the refill while these ran (one a second) shift it a little.
		if refusal == "" || failed > 120 {
			t.Fatalf("%d guesses failed from %d addresses without the hub refusing more", failed, refusedAt/25+1)
		}
		spent := promcheck.Value(scrapeHub(t, h), "flotilla_joins_budget_spent_total", nil)
		if spent < 1 {
			t.Errorf("flotilla_joins_budget_spent_total = %v, want the refusal counted", spent)
		}
		honestReady(t, "while joins are refused")
		t.Logf("after: the hub refused joins after %d failed guesses from %d addresses: %q", failed, refusedAt/25+1, refusal)
	})

	t.Run("the honest cluster's health changes are stored", func(t *testing.T) {
		honestReady(t, "after every attack")
		if err := f.agents["member-1"].Stop(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "member-1 unreachable, stored", func() (bool, string) {
			c := h.cluster(t, "member-1")
			return readyOf(c) == metav1.ConditionUnknown && hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule), describe(c)
		})
	})
}

// probeYAML is a ConfigMap for member-1 and the rogue cluster: a Work the
// rogue agent can report about.
const probeYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: probe, namespace: hostile}
data: {a: b}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: probe, namespace: hostile}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: probe}]
  placement:
    clusterAffinity: {clusterNames: [member-1, rogue]}
`

// plausibleReport is what a healthy 3-node cluster reports.
func plausibleReport() *protocol.ClusterStatus {
	return &protocol.ClusterStatus{ObservedAt: time.Now(), KubernetesVersion: "v1.37.2", APIServerHealthy: true, HealthMessage: "ok",
		NodesTotal: 3, NodesReady: 3,
		Allocatable: map[string]string{"cpu": "24", "memory": "96Gi", "pods": "330"},
		Allocated:   map[string]string{"cpu": "0", "memory": "0", "pods": "0"},
		ServedAPIs: &protocol.ServedAPIs{Items: []protocol.APIEnablement{
			{GroupVersion: "v1", Resources: []protocol.APIResource{{Name: "configmaps", Kind: "ConfigMap"}, {Name: "namespaces", Kind: "Namespace"}}},
			{GroupVersion: "apps/v1", Resources: []protocol.APIResource{{Name: "deployments", Kind: "Deployment"}}},
		}}}
}

// rogueAgent is a protocol-level client with a valid agent certificate
// that sends what it likes.
type rogueAgent struct {
	conn    *quic.Conn
	mu      sync.Mutex // serialises writes on control
	control *quic.Stream
	seq     uint64
	status  *quic.Stream
	work    *quic.Stream
	workR   *protocol.Reader

	goAwayMu sync.Mutex
	goAway   string // the reason of a GoAway or Error from the hub
}

// dialRogue connects and says hello for cluster, like an agent; the
// connection closes when owner ends.
func dialRogue(t, owner *testing.T, addr string, tlsConf *tls.Config, cluster string) *rogueAgent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, tlsConf, protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() { _ = conn.CloseWithError(0, "test done") })
	control, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reader := sayHello(t, control, cluster)
	r := &rogueAgent{conn: conn, control: control}
	go r.readControl(reader)
	return r
}

// sayHello opens control as the control stream of cluster's session, as
// an agent does, and returns its reader once the hub welcomed it.
func sayHello(t *testing.T, control io.ReadWriter, cluster string) *protocol.Reader {
	t.Helper()
	if err := protocol.WriteStreamKind(control, protocol.StreamControl); err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteMessage(control, &protocol.Hello{ProtocolVersion: protocol.Version, ClusterName: cluster, AgentVersion: "hostile", LeaseDurationSeconds: 2}); err != nil {
		t.Fatal(err)
	}
	reader := protocol.NewReader(control, 0)
	welcome, err := reader.ReadMessage()
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if _, ok := welcome.(*protocol.Welcome); !ok {
		t.Fatalf("hello answered with %v", welcome.Type())
	}
	return reader
}

// readControl notes a GoAway or Error; acknowledgements are dropped.
func (r *rogueAgent) readControl(reader *protocol.Reader) {
	for {
		m, err := reader.ReadMessage()
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *protocol.GoAway:
			r.setGoneAway("GoAway: " + m.Reason)
		case *protocol.Error:
			r.setGoneAway("Error: " + m.Error())
		}
	}
}

func (r *rogueAgent) setGoneAway(reason string) {
	r.goAwayMu.Lock()
	defer r.goAwayMu.Unlock()
	if r.goAway == "" {
		r.goAway = reason
	}
}

func (r *rogueAgent) goneAway() string {
	r.goAwayMu.Lock()
	defer r.goAwayMu.Unlock()
	return r.goAway
}

// endReason is why the hub ended the session: its GoAway or Error
// message, else the reason it closed the connection with ("" while open).
// A close right after a GoAway may overtake the GoAway itself.
func (r *rogueAgent) endReason() string {
	if said := r.goneAway(); said != "" {
		return said
	}
	if r.conn.Context().Err() == nil {
		return ""
	}
	return fmt.Sprint(context.Cause(r.conn.Context()))
}

func (r *rogueAgent) renew(agentTime time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return protocol.WriteMessage(r.control, &protocol.LeaseRenew{Seq: r.seq, AgentTime: agentTime})
}

// keepRenewing renews every 500 ms until ctx ends or the session does.
func (r *rogueAgent) keepRenewing(ctx context.Context) {
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		if r.renew(time.Now()) != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// report sends a status report on the session's status stream and
// returns its size.
func (r *rogueAgent) report(t *testing.T, s *protocol.ClusterStatus) int {
	t.Helper()
	if r.status == nil {
		r.status = r.openStream(t, protocol.StreamStatus)
	}
	s.ObservedAt = time.Now()
	var buf bytes.Buffer
	if err := protocol.WriteMessage(&buf, s); err != nil {
		t.Fatal(err)
	}
	if _, err := r.status.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return buf.Len()
}

// bulkyReport is report n of a plausible cluster that serves ~470 KiB of
// APIs (450 group versions with names Kubernetes allows: just under what
// a Cluster stores), all of them and its allocated pods different in
// every report.
func bulkyReport(n int) *protocol.ClusterStatus {
	s := plausibleReport()
	s.Allocated = map[string]string{"cpu": "0", "memory": "0", "pods": strconv.Itoa(bulkyPods(n))}
	s.ServedAPIs = &protocol.ServedAPIs{}
	for g := range 450 {
		gv := protocol.APIEnablement{GroupVersion: fmt.Sprintf("g%d-%s.example.com/v1", g, strings.Repeat("x", 40))}
		for k := range 8 {
			gv.Resources = append(gv.Resources, protocol.APIResource{Name: fmt.Sprintf("r%d%s%d", k, strings.Repeat("y", 50), n), Kind: fmt.Sprintf("K%d%s", k, strings.Repeat("z", 40))})
		}
		s.ServedAPIs.Items = append(s.ServedAPIs.Items, gv)
	}
	return s
}

// bulkyPods is the allocated pods of bulky report n.
func bulkyPods(n int) int { return n%300 + 1 }

func (r *rogueAgent) openStream(t *testing.T, kind protocol.StreamKind) *quic.Stream {
	t.Helper()
	str, err := r.conn.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteStreamKind(str, kind); err != nil {
		t.Fatal(err)
	}
	return str
}

// takeWork opens the work stream with an empty inventory, reads the first
// Work the hub sends and answers that it is applied.
func (r *rogueAgent) takeWork(t *testing.T) *protocol.WorkUpsert {
	t.Helper()
	r.work = r.openStream(t, protocol.StreamWork)
	if err := protocol.WriteMessage(r.work, &protocol.WorkInventory{}); err != nil {
		t.Fatal(err)
	}
	r.workR = protocol.NewReader(r.work, protocol.MaxWorkFrameSize)
	_ = r.work.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		m, err := r.workR.ReadMessage()
		if err != nil {
			t.Fatalf("read the work stream: %v", err)
		}
		if up, ok := m.(*protocol.WorkUpsert); ok {
			if err := protocol.WriteMessage(r.work, &protocol.WorkApplied{Name: up.Name, Generation: up.Generation, Applied: true}); err != nil {
				t.Fatal(err)
			}
			return up
		}
	}
}

// sendWorkStatus sends report n about w: manifests results whose status
// fields take statusBytes each (within the protocol's per-manifest bound,
// near the 1 MiB frame limit in all), and returns its size.
func (r *rogueAgent) sendWorkStatus(t *testing.T, w *protocol.WorkUpsert, n, manifests, statusBytes int) int {
	t.Helper()
	m := &protocol.WorkStatus{Name: w.Name, Generation: w.Generation}
	filler := strings.Repeat(string(rune('a'+n%26)), statusBytes-32)
	for i := range manifests {
		m.Manifests = append(m.Manifests, protocol.ManifestResult{Ordinal: i, Version: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i),
			Health: protocol.HealthHealthy, Message: fmt.Sprintf("report %d", n), Status: json.RawMessage(`{"fill":"` + filler + `"}`)})
	}
	var buf strings.Builder
	if err := protocol.WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	if _, err := r.work.Write([]byte(buf.String())); err != nil {
		t.Fatalf("report %d: %v", n, err)
	}
	return buf.Len()
}

// sendFrame writes a frame of size bytes of type typ on the work stream
// (its payload is never complete: the hub must refuse it by its length).
func (r *rogueAgent) sendFrame(size int, typ protocol.MessageType) error {
	frame := []byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size), byte(typ)}
	_, err := r.work.Write(append(frame, make([]byte, 64<<10)...))
	return err
}

// tokenLockoutFailures failed joins of one token ID lock it out.
const tokenLockoutFailures = 5

// guessJoin tries to join from local address source with a guessed
// bootstrap token and returns the hub's refusal.
func guessJoin(t *testing.T, addr, source, token string) *protocol.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	hub, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(source)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	// The test does not check the hub: the pin is the agent's business.
	conf := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{protocol.JoinALPN}, InsecureSkipVerify: true}
	conn, err := quic.Dial(ctx, udp, hub, conf, protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteStreamKind(str, protocol.StreamJoin); err != nil {
		t.Fatal(err)
	}
	req := &protocol.JoinRequest{ProtocolVersion: protocol.Version, ClusterName: "guess", BootstrapToken: token, CSR: []byte("not a request"), AgentVersion: "hostile"}
	if err := protocol.WriteMessage(str, req); err != nil {
		t.Fatal(err)
	}
	m, err := protocol.NewReader(str, protocol.MaxJoinFrame).ReadMessage()
	var closed *quic.ApplicationError
	if errors.As(err, &closed) {
		code, message, _ := strings.Cut(closed.ErrorMessage, ": ")
		return &protocol.Error{Code: code, Message: message} // the close reason, if it overtook the answer
	}
	if err != nil {
		t.Fatalf("join answer: %v", err)
	}
	e, ok := m.(*protocol.Error)
	if !ok {
		t.Fatalf("a guessed token was answered with %v", m.Type())
	}
	return e
}

// storeSize is the size of the hub's etcd database, read from its
// embedded etcd's socket.
func storeSize(t *testing.T, h *hub) int64 {
	t.Helper()
	endpoint := "unix://" + filepath.Join(h.dataDir, "etcd", "client.sock")
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st, err := client.Status(t.Context(), endpoint)
	if err != nil {
		t.Fatalf("etcd status: %v", err)
	}
	return st.DbSize
}

// allEvents counts the events about a cluster, repeats included.
func allEvents(t *testing.T, h *hub, cluster string) int32 {
	t.Helper()
	return eventCount(t, h, "Cluster", "default", cluster, "")
}

// grepMetrics returns the lines of metrics that start with one of names
// (each series of a labelled one).
func grepMetrics(metrics string, names ...string) string {
	var out []string
	for line := range strings.SplitSeq(metrics, "\n") {
		for _, name := range names {
			if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, ", ")
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestStoreGuardRefusesAgentGrowth floods a hub whose store guard allows
// agents 8 MiB (a quarter of a 32 MiB quota) with Work status reports:
// once the store holds more, the hub stores no more of them and says so
// (metric, StoreFull event), while the honest cluster's health changes are
// still stored. Recovery (compaction, defragmentation, NOSPACE disarmed)
// is store.TestGuardRefusesAndRecovers'.
func TestStoreGuardRefusesAgentGrowth(t *testing.T) {
	f := startFleet(t, 1, "--store-check-interval=1s", "--store-quota-bytes=33554432", "--store-agent-write-threshold=0.25")
	h := f.hub
	rogue := dialRogue(t, t, h.quicAddr, loadClientTLS(t, h.issueCert(t, "rogue"), "127.0.0.1"), "rogue")
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go rogue.keepRenewing(ctx)
	rogue.report(t, plausibleReport())
	waitReady(t, h, "rogue", 30*time.Second)
	f.apply("probe.yaml", probeYAML)
	work := rogue.takeWork(t)
	before := storeSize(t, h)
	reports := 0
	waitFor(t, 90*time.Second, "the store guard refusing agent writes", func() (bool, string) {
		for range 20 {
			rogue.sendWorkStatus(t, work, reports, 60, 4000) // status fields stored: 60 × 4 KB a report
			reports++
		}
		m := h.metrics(t)
		return strings.Contains(m, "flotilla_store_refusing_agent_writes 1\n"), grepMetrics(m, "flotilla_store_db_in_use_bytes", "flotilla_store_db_size_bytes")
	})
	// Reports sent from now on are dropped, not stored.
	for range 50 {
		rogue.sendWorkStatus(t, work, reports, 60, 4000)
		reports++
	}
	waitFor(t, 30*time.Second, "reports dropped", func() (bool, string) {
		m := h.metrics(t)
		return !strings.Contains(m, "flotilla_work_reports_dropped_total 0\n"), grepMetrics(m, "flotilla_work_reports_dropped_total")
	})
	if n := eventCount(t, h, "Namespace", "default", v1alpha1.LeaseNamespace, "StoreFull"); n != 1 {
		t.Errorf("%d StoreFull events, want 1", n)
	}
	if c := h.cluster(t, "member-1"); readyOf(c) != metav1.ConditionTrue {
		t.Errorf("member-1 is %s while the store refuses agent writes, want Ready", describe(c))
	}
	if err := f.agents["member-1"].Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "member-1 unreachable, stored while agent writes are refused", func() (bool, string) {
		c := h.cluster(t, "member-1")
		return readyOf(c) == metav1.ConditionUnknown && hasTaint(c, v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoSchedule), describe(c)
	})
	m := h.metrics(t)
	t.Logf("%d reports; store %.1f → %.1f MiB; %s", reports, mib(before), mib(storeSize(t, h)),
		grepMetrics(m, "flotilla_store_refusing_agent_writes", "flotilla_store_agent_writes_refused_total", "flotilla_work_reports_dropped_total", "flotilla_store_db_in_use_bytes"))
}
