package cli

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const clusterPath = "/apis/flotilla.io/v1alpha1/clusters/"

// updates is the Updates (PUTs) flotilla sent, with their bodies.
func (h *testHub) updates() (requests, bodies []string) {
	return h.sentMatching(http.MethodPut, clusterPath)
}

// On the hub, spec.unschedulable is all cordon changes: the hub's registry
// keeps the unschedulable taint in line with it (not running here).
func TestCordonUncordon(t *testing.T) {
	tests := []struct {
		name              string
		args              []string
		wantStdout        string
		wantUnschedulable bool
		wantUpdate        bool
	}{
		{name: "cordon", args: []string{"cordon", "edge-1"}, wantStdout: "cluster/edge-1 cordoned\n", wantUnschedulable: true, wantUpdate: true},
		{name: "uncordon", args: []string{"uncordon", "edge-2"}, wantStdout: "cluster/edge-2 uncordoned\n", wantUpdate: true},
		{name: "cordon a cordoned cluster", args: []string{"cordon", "edge-2"}, wantStdout: "cluster/edge-2 already cordoned\n", wantUnschedulable: true},
		{name: "uncordon a schedulable cluster", args: []string{"uncordon", "edge-1"}, wantStdout: "cluster/edge-1 already uncordoned\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixtureHub(t)
			name := tt.args[1]
			taintsBefore := taintsOf(t, f.testHub, name)
			r := f.run(t, tt.args...)
			wantExit(t, r, 0)
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
			if got := f.cluster(t, name).Spec.Unschedulable; got != tt.wantUnschedulable {
				t.Errorf("spec.unschedulable = %t, want %t", got, tt.wantUnschedulable)
			}
			if diff := cmp.Diff(taintsBefore, taintsOf(t, f.testHub, name)); diff != "" {
				t.Errorf("taints changed (-before +after):\n%s", diff)
			}
			if got, _ := f.updates(); (len(got) > 0) != tt.wantUpdate {
				t.Errorf("updates %q, want one: %t", got, tt.wantUpdate)
			}
		})
	}
}

// concurrentWriter changes the cluster name with change after flotilla
// read it, the first times times (each read after the first write
// attempt's conflict too), so flotilla's write conflicts.
func (h *testHub) concurrentWriter(t *testing.T, name string, times int, change func(cl *v1alpha1.Cluster)) {
	t.Helper()
	var mu sync.Mutex
	h.setAnswered(func(req *http.Request, _ *http.Response) {
		if req.Method != http.MethodGet || req.URL.Path != clusterPath+name {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if times == 0 {
			return
		}
		times--
		clusters := h.Flotilla.FlotillaV1alpha1().Clusters()
		cl, err := clusters.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("concurrent writer: %v", err)
			return
		}
		change(cl)
		if _, err := clusters.Update(context.Background(), cl, metav1.UpdateOptions{}); err != nil {
			t.Errorf("concurrent writer: %v", err)
		}
	})
}

func TestCordonRetriesOnConflict(t *testing.T) {
	f := newFixtureHub(t)
	f.concurrentWriter(t, "edge-1", 1, func(cl *v1alpha1.Cluster) { cl.Labels["touched"] = "yes" })
	r := f.run(t, "cordon", "edge-1")
	wantExit(t, r, 0)
	got := f.cluster(t, "edge-1")
	if !got.Spec.Unschedulable || got.Labels["touched"] != "yes" {
		t.Errorf("after retry: unschedulable %t, labels %v; want true and the concurrent label kept", got.Spec.Unschedulable, got.Labels)
	}
	if updates, _ := f.updates(); len(updates) != 2 {
		t.Errorf("sent %d updates, want 2: %q", len(updates), updates)
	}
}

func TestCordonErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"missing cluster", []string{"cordon", "nope"}, 1, "error: clusters.flotilla.io \"nope\" not found\n"},
		{"no name", []string{"uncordon"}, 2, "error: expected exactly one cluster name, got 0 arguments []\nSee 'flotilla uncordon --help' for usage.\n"},
		{"two names", []string{"cordon", "cluster", "edge-1"}, 2, "error: expected exactly one cluster name, got 2 arguments [\"cluster\" \"edge-1\"]\nSee 'flotilla cordon --help' for usage.\n"},
	}
	f := newFixtureHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t, tt.args...)
			wantExit(t, r, tt.wantCode)
			if diff := cmp.Diff(tt.want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if writes := f.writes(); len(writes) != 0 {
				t.Errorf("sent %q, want no write", writes)
			}
		})
	}
}
