package e2e

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestWorkDeletedLoop is the WorkDeleted loop: an agent with a valid
// certificate says, as fast as it can for 20 s, that it deleted its Work
// (which the hub wants it to hold) and Works that do not exist, and
// answers the deletions of bogus Works it listed in its inventory. The
// hub must answer from its informer and pace the Work's re-sends, so the
// loop costs its Kubernetes API next to nothing, while the honest
// member-1 stays Ready throughout.
//
// Before (each held Work's report read the Work from the API, a quorum
// read, and sent it again at once): see the figures the test logs.
func TestWorkDeletedLoop(t *testing.T) {
	const (
		loop        = 20 * time.Second
		bogusListed = 200
	)
	f := startFleet(t, 1)
	h := f.hub
	rogue := dialRogue(t, t, h.quicAddr, loadClientTLS(t, h.issueCert(t, "rogue"), "127.0.0.1"), "rogue")
	go rogue.keepRenewing(t.Context())
	rogue.report(t, plausibleReport())
	waitReady(t, h, "rogue", 30*time.Second)
	f.apply("probe.yaml", probeYAML)

	var inventory []protocol.WorkRef
	for i := range bogusListed {
		inventory = append(inventory, protocol.WorkRef{Name: fmt.Sprintf("listed-%d", i), Generation: 1})
	}
	loopr := startDeleteLooper(t, rogue, inventory)
	work := loopr.firstUpsert(t)
	namespace := v1alpha1.ExecutionNamespace("rogue")
	waitFor(t, 30*time.Second, "the hub records the rogue's Work applied", func() (bool, string) {
		var w v1alpha1.Work
		code := h.getJSON(t, "/apis/flotilla.io/v1alpha1/namespaces/"+namespace+"/works/"+work.Name, &w)
		return code == http.StatusOK && w.Status.ObservedGeneration == work.Generation, fmt.Sprintf("%d %+v", code, w.Status)
	})
	honestReady := func(when string) {
		t.Helper()
		if c := h.cluster(t, "member-1"); readyOf(c) != metav1.ConditionTrue || len(c.Spec.Taints) > 0 {
			t.Errorf("%s: the honest member-1 is %s, want Ready without taints", when, describe(c))
		}
	}

	// What the hub asks of its API with nobody attacking, for comparison.
	idleStart, idleFrom := apiRequests(t, h), time.Now()
	time.Sleep(loop / 2) // a measuring window, not synchronisation
	idle := apiRequests(t, h).minus(idleStart).perSecond(time.Since(idleFrom))

	before, sentBefore, from := apiRequests(t, h), metricValue(t, h, "flotilla_works_sent_total"), time.Now()
	sent := loopr.flood(t, work.Name, loop, func() { honestReady("during the loop") })
	took := time.Since(from)
	attack := apiRequests(t, h).minus(before).perSecond(took)
	resent := metricValue(t, h, "flotilla_works_sent_total") - sentBefore
	honestReady("after the loop")

	t.Logf("%d WorkDeleted reports in %v (%d answers to deletions of listed bogus Works); the rogue got %d Works back (flotilla_works_sent_total +%.0f)",
		sent, took.Round(time.Millisecond), loopr.answered.Load(), loopr.upserts.Load(), resent)
	t.Logf("hub's API requests/s: idle %s; during the loop %s", idle, attack)
	t.Logf("%s", grepMetrics(h.metrics(t), "flotilla_work_deleted_unrequested_total", "flotilla_work_reports_coalesced_total"))
	if extra := attack.total() - idle.total(); extra > 5 {
		t.Errorf("the loop cost the hub's API %.1f requests/s more than idle (%s vs %s), want at most 5", extra, attack, idle)
	}
	// The session's status pace: a burst of 1,000, then 100 a second.
	if limit := 1000 + 100*took.Seconds() + 50; resent > limit {
		t.Errorf("the hub sent the Work again %.0f times in %v, want at most %.0f (its pace)", resent, took.Round(time.Second), limit)
	}
	if v := metricValue(t, h, "flotilla_work_deleted_unrequested_total"); !(v > 0) {
		t.Errorf("flotilla_work_deleted_unrequested_total = %v, want the loop counted", v)
	}
}

// deleteLooper is a rogue agent's work stream that answers every deletion
// at once and counts what the hub sends.
type deleteLooper struct {
	r        *rogueAgent
	mu       sync.Mutex // serialises writes on the work stream
	upserts  atomic.Int64
	answered atomic.Int64
	first    chan *protocol.WorkUpsert
}

// startDeleteLooper opens the rogue's work stream with inventory and reads
// what the hub sends until the test ends.
func startDeleteLooper(t *testing.T, r *rogueAgent, inventory []protocol.WorkRef) *deleteLooper {
	t.Helper()
	l := &deleteLooper{r: r, first: make(chan *protocol.WorkUpsert, 1)}
	r.work = r.openStream(t, protocol.StreamWork)
	if err := protocol.WriteMessage(r.work, &protocol.WorkInventory{Works: inventory}); err != nil {
		t.Fatal(err)
	}
	r.workR = protocol.NewReader(r.work, protocol.MaxWorkFrameSize)
	go l.read()
	return l
}

func (l *deleteLooper) read() {
	for {
		m, err := l.r.workR.ReadMessage()
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *protocol.WorkUpsert:
			if l.upserts.Add(1) == 1 {
				l.first <- m
				_ = l.write(&protocol.WorkApplied{Name: m.Name, Generation: m.Generation, Applied: true})
			}
		case *protocol.WorkDelete:
			l.answered.Add(1)
			_ = l.write(&protocol.WorkDeleted{Name: m.Name})
		}
	}
}

func (l *deleteLooper) write(msgs ...protocol.Message) error {
	var buf bytes.Buffer
	for _, m := range msgs {
		if err := protocol.WriteMessage(&buf, m); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.r.work.Write(buf.Bytes())
	return err
}

// firstUpsert waits for the first Work the hub sends (answered applied).
func (l *deleteLooper) firstUpsert(t *testing.T) *protocol.WorkUpsert {
	t.Helper()
	select {
	case up := <-l.first:
		return up
	case <-time.After(30 * time.Second):
		t.Fatal("the hub sent the rogue no Work within 30 s")
		return nil
	}
}

// flood sends WorkDeleted for work and for names that never existed,
// in batches as fast as the stream takes them, for d (and at most 5
// million reports); check runs about every second. It returns how many
// reports it sent.
func (l *deleteLooper) flood(t *testing.T, work string, d time.Duration, check func()) int {
	t.Helper()
	const batch, most = 100, 5_000_000
	deadline, nextCheck := time.Now().Add(d), time.Now().Add(time.Second)
	sent := 0
	for n := 0; time.Now().Before(deadline) && sent < most; n++ {
		msgs := make([]protocol.Message, 0, batch)
		for i := range batch {
			name := work
			if i%2 == 1 {
				name = fmt.Sprintf("bogus-%d-%d", n, i)
			}
			msgs = append(msgs, &protocol.WorkDeleted{Name: name})
		}
		if err := l.write(msgs...); err != nil {
			t.Fatalf("after %d reports: %v (session ended: %s)", sent, err, l.r.endReason())
		}
		sent += batch
		if time.Now().After(nextCheck) {
			check()
			nextCheck = time.Now().Add(time.Second)
		}
	}
	return sent
}

// requestCounts are the hub's own requests to its Kubernetes API, by
// method (rest_client_requests_total).
type requestCounts map[string]float64

func apiRequests(t *testing.T, h *hub) requestCounts {
	t.Helper()
	out := requestCounts{}
	mf := scrapeHub(t, h)["rest_client_requests_total"]
	for _, m := range mf.GetMetric() {
		out[labelOf(m, "method")] += m.GetCounter().GetValue()
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (c requestCounts) minus(o requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

func (c requestCounts) perSecond(d time.Duration) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		out[k] = v / d.Seconds()
	}
	return out
}

func (c requestCounts) total() float64 {
	sum := 0.0
	for _, v := range c {
		sum += v
	}
	return sum
}

func (c requestCounts) String() string {
	var parts []string
	for k, v := range c {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, v))
		}
	}
	sort.Strings(parts)
	return fmt.Sprintf("%.1f (%s)", c.total(), strings.Join(parts, ", "))
}

// metricValue is a metric of the hub without labels (NaN if absent).
func metricValue(t *testing.T, h *hub, name string) float64 {
	t.Helper()
	mf := scrapeHub(t, h)[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return math.NaN()
	}
	m := mf.GetMetric()[0]
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.GetGauge().GetValue()
}
