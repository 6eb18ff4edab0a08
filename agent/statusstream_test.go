package agent

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

func sampleStatus() *protocol.ClusterStatus {
	return &protocol.ClusterStatus{
		ObservedAt: time.Unix(100, 0), KubernetesVersion: "v1.37.2", APIServerHealthy: true, HealthMessage: "ok",
		NodesTotal: 3, NodesReady: 3,
		Allocatable: map[string]string{"cpu": "24", "pods": "330"},
		Allocated:   map[string]string{"cpu": "3", "pods": "12"},
	}
}

func TestReportGate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		change func(s *protocol.ClusterStatus)
		after  time.Duration
		want   bool
	}{
		{"unchanged", func(*protocol.ClusterStatus) {}, 10 * time.Second, false},
		{"only observed later", func(s *protocol.ClusterStatus) { s.ObservedAt = s.ObservedAt.Add(time.Minute) }, 10 * time.Second, false},
		{"unchanged for the resend period", func(*protocol.ClusterStatus) {}, UnchangedReportEvery, true},
		{"a node fewer ready", func(s *protocol.ClusterStatus) { s.NodesReady = 2 }, time.Second, true},
		{"unhealthy", func(s *protocol.ClusterStatus) { s.APIServerHealthy, s.HealthMessage = false, "timeout" }, time.Second, true},
		{"a pod more", func(s *protocol.ClusterStatus) { s.Allocated["pods"] = "13" }, time.Second, true},
		{"a resource gone", func(s *protocol.ClusterStatus) { delete(s.Allocatable, "cpu") }, time.Second, true},
		{"served APIs to send", func(s *protocol.ClusterStatus) { s.ServedAPIs = &protocol.ServedAPIs{} }, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g reportGate
			first := sampleStatus()
			if !g.due(first, t0) {
				t.Fatal("the first report of a session is not due")
			}
			g.sent(first, t0)
			first.Allocated["pods"] = "99" // the gate keeps its own copy
			next := sampleStatus()
			tt.change(next)
			if got := g.due(next, t0.Add(tt.after)); got != tt.want {
				t.Errorf("due = %v, want %v", got, tt.want)
			}
		})
	}
}

// Every field of a report but ObservedAt and ServedAPIs is something the
// hub keeps: a change to any of them must be sent (a field added to
// ClusterStatus and forgotten in sameReport fails here).
func TestSameReportComparesEveryField(t *testing.T) {
	typ := reflect.TypeFor[protocol.ClusterStatus]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if name == "ObservedAt" || name == "ServedAPIs" {
			continue
		}
		a, b := sampleStatus(), sampleStatus()
		f := reflect.ValueOf(b).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Int32:
			f.SetInt(f.Int() + 1)
		case reflect.Map:
			f.SetMapIndex(reflect.ValueOf("extra"), reflect.ValueOf("1"))
		default:
			t.Fatalf("field %s of kind %v: teach this test to change it", name, f.Kind())
		}
		if sameReport(a, b) {
			t.Errorf("reports differing in %s compare the same", name)
		}
	}
}

// TestUnchangedStatusIsNotResent drives the status loop with a fake clock:
// after the session's first report, ticks with nothing new send nothing,
// and the next report is the one that carries the change.
func TestUnchangedStatusIsNotResent(t *testing.T) {
	p := newTestPKI(t)
	hub := startTestHub(t, p.hubTLS(t), nil) // renew interval 200ms
	clk := clocktesting.NewFakeClock(time.Now().UTC().Truncate(time.Second).Add(time.Minute))
	client := fakeCluster(1)
	a := newTestAgent(t, p, hub.addr(), client, healthy, func(cfg *Config) { cfg.Clock = clk })
	startAgent(t, a)

	first := hub.waitFor(t, "the first ClusterStatus", waitTimeout, isKind("status")).status
	if first.NodesTotal != 1 {
		t.Fatalf("first report has %d nodes, want 1", first.NodesTotal)
	}
	// Status ticks (300ms) with nothing new; each step is acknowledged by
	// a renewal, so the agent's loops have seen the clock move.
	for range 5 {
		clk.Step(300 * time.Millisecond)
		hub.waitFor(t, "a renewal", waitTimeout, isKind("renew"))
	}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), testNode(nodeName(1), true, "8", "32Gi", "110"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		nodes, _ := a.capacity.Nodes()
		return nodes == 2, nil
	}); err != nil {
		t.Fatalf("the agent's node watch did not see the new node: %v", err)
	}
	clk.Step(300 * time.Millisecond)
	next := hub.waitFor(t, "the next ClusterStatus", waitTimeout, isKind("status")).status
	if next.NodesTotal != 2 {
		t.Errorf("the report after unchanged ticks has %d nodes, want the change (2): unchanged reports were sent", next.NodesTotal)
	}
}
