package cli

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDescribeCluster(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "healthy",
			args: []string{"describe", "cluster", "edge-1"},
			want: `Name:                 edge-1
Labels:               env=prod
                      site=lisbon
Provider:             aws
Region:               eu-west-1
Zone:                 eu-west-1a
Created:              {{created}}
Unschedulable:        false
Taints:               <none>
Conditions:
  TYPE          STATUS   REASON         AGE    MESSAGE
  Ready         True     ClusterReady   120m   cluster is healthy and ready
  ClockSynced   True     ClockSynced    150m
Kubernetes Version:   v1.31.2
Nodes:                3/3 ready
Resources:
  RESOURCE   ALLOCATABLE   ALLOCATED
  cpu        8             2500m (31%)
  memory     32Gi          8Gi (25%)
  pods       110           -
Agent:
  Version:            v0.1.0
  Connected To:       hub-0
  Transport:          quic
  Connected Since:    2026-05-01T10:00:00Z (120m ago)
  Clock Skew:         12ms
Lease:
  Holder:             edge-1-agent-7c9f
  Renewed:            3s ago / 40s
  State:              fresh
  Transitions:        1
Events:
  TYPE     REASON              AGE    COUNT   MESSAGE
  Normal   ClusterRegistered   3h     1       agent edge-1-agent-7c9f registered
  Normal   ClusterReady        120m   2       cluster is ready
`,
		},
		{
			name: "unreachable and cordoned",
			args: []string{"describe", "clusters", "edge-2"},
			want: `Name:                 edge-2
Labels:               <none>
Provider:             onprem
Region:               -
Zone:                 -
Created:              {{created}}
Unschedulable:        true
Taints:               cluster.flotilla.io/unreachable:NoSchedule     added 90s ago
                      cluster.flotilla.io/unschedulable:NoSchedule   added 30m ago
                      team=payments:PreferNoSchedule                 added 20m ago by ClusterTaintPolicy payments-only
Conditions:
  TYPE    STATUS    REASON                 AGE   MESSAGE
  Ready   Unknown   ClusterStatusUnknown   90s   cluster lease expired
Kubernetes Version:   v1.30.4
Nodes:                2/4 ready
Resources:            <none>
Agent:
  Version:            v0.1.0
  Connected To:       -
  Transport:          -
  Connected Since:    -
  Clock Skew:         -
Lease:
  Holder:             edge-2-agent-a1
  Renewed:            95s ago / 40s
  State:              expired
  Transitions:        0
Events:
  TYPE      REASON               AGE   COUNT   MESSAGE
  Warning   ClusterUnreachable   90s   1       lease expired
`,
		},
	}
	f := newFixtureHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t, tt.args...)
			wantExit(t, r, 0)
			want := strings.Replace(tt.want, "{{created}}", created(f.clusters[tt.args[2]].CreationTimestamp), 1)
			if diff := cmp.Diff(want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
	// The cluster, its lease, and the events selected by the API.
	wantRequests := []string{
		"GET /apis/flotilla.io/v1alpha1/clusters/edge-1",
		"GET /apis/coordination.k8s.io/v1/namespaces/flotilla-cluster-lease/leases/edge-1",
		"GET /api/v1/events?fieldSelector=" + url.QueryEscape("involvedObject.kind=Cluster,involvedObject.name=edge-1"),
	}
	if diff := cmp.Diff(wantRequests, f.sent()[:3]); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// A cluster that never connected has no lease: describe says so instead
// of failing.
func TestDescribeWithoutLeaseOrEvents(t *testing.T) {
	h := newHub(t)
	cl := h.addCluster(t, v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "new"}})
	r := h.run(t, "describe", "cluster", "new")
	wantExit(t, r, 0)
	for _, want := range []string{"Lease: <none>", "Events: <none>", "Agent: <none>", "Conditions: <none>", "Created: " + created(cl.CreationTimestamp)} {
		if !strings.Contains(squeeze(r.stdout), want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestDescribeShowsLatestEvents(t *testing.T) {
	h := newHub(t)
	h.addCluster(t, healthyCluster())
	// An event of the new API, as the hub's recorder writes them: eventTime
	// and series instead of lastTimestamp and count.
	h.addEvent(t, corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "edge-1.flapping"},
		InvolvedObject: corev1.ObjectReference{Kind: v1alpha1.KindCluster, Name: "edge-1"},
		Type:           "Warning", Reason: "Flapping", Message: "lease\nlate",
		EventTime: *microAgo(5 * time.Second), Series: &corev1.EventSeries{Count: 4, LastObservedTime: *microAgo(5 * time.Second)},
	})
	// Stored in an order of their names, not of their times.
	for i := range 25 {
		h.addEvent(t, event("edge-1", "Normal", fmt.Sprintf("Step%02d", 24-i), "step", time.Duration(30-(24-i))*time.Minute, 1))
	}
	// Another cluster's event is not shown.
	h.addEvent(t, event("edge-10", "Normal", "Other", "not edge-1", time.Minute, 1))
	r := h.run(t, "describe", "cluster", "edge-1")
	wantExit(t, r, 0)
	out := squeeze(r.stdout)
	_, events, _ := strings.Cut(out, "Events:\n")
	lines := strings.Split(events, "\n")
	want := []string{"TYPE REASON AGE COUNT MESSAGE"}
	for i := 6; i < 25; i++ {
		want = append(want, fmt.Sprintf("Normal Step%02d %dm 1 step", i, 30-i))
	}
	want = append(want, "Warning Flapping 5s 4 lease late")
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestDescribeNotFound(t *testing.T) {
	r := newFixtureHub(t).run(t, "describe", "cluster", "nope")
	wantExit(t, r, 1)
	if diff := cmp.Diff("error: clusters.flotilla.io \"nope\" not found\n", r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
