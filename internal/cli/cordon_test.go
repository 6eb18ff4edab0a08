package cli

import (
	"testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
)

func TestCordonUncordon(t *testing.T) {
	tests := []struct {
		name              string
		args              []string
		wantStdout        string
		wantUnschedulable bool
		wantTaints        []string
		wantPut           bool
	}{
		{
			name: "cordon", args: []string{"cordon", "edge-1"}, wantStdout: "cluster/edge-1 cordoned\n",
			wantUnschedulable: true, wantTaints: []string{"cluster.flotilla.io/unschedulable:NoSchedule"}, wantPut: true,
		},
		{
			name: "uncordon", args: []string{"uncordon", "edge-2"}, wantStdout: "cluster/edge-2 uncordoned\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "team=payments:PreferNoSchedule"}, wantPut: true,
		},
		{
			name: "cordon a cordoned cluster", args: []string{"cordon", "edge-2"}, wantStdout: "cluster/edge-2 already cordoned\n",
			wantUnschedulable: true,
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"team=payments:PreferNoSchedule"},
		},
		{
			name: "uncordon a schedulable cluster", args: []string{"uncordon", "edge-1"}, wantStdout: "cluster/edge-1 already uncordoned\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newFixtureHub(t)
			r := run(t, hub, tt.args...)
			wantExit(t, r, 0)
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
			name := tt.args[1]
			if got := hub.cluster(t, name).Spec.Unschedulable; got != tt.wantUnschedulable {
				t.Errorf("spec.unschedulable = %t, want %t", got, tt.wantUnschedulable)
			}
			if diff := cmp.Diff(tt.wantTaints, taintsOf(t, hub, name)); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if got := len(hub.sentPuts()) > 0; got != tt.wantPut {
				t.Errorf("sent a PUT: %t, want %t", got, tt.wantPut)
			}
		})
	}
}

func TestCordonRetriesOnConflict(t *testing.T) {
	hub := newFixtureHub(t)
	hub.conflicts = 1
	hub.onConflict = func(cl *v1alpha1.Cluster) { cl.Labels["touched"] = "yes" }
	r := run(t, hub, "cordon", "edge-1")
	wantExit(t, r, 0)
	got := hub.cluster(t, "edge-1")
	if !got.Spec.Unschedulable || got.Labels["touched"] != "yes" {
		t.Errorf("after retry: unschedulable %t, labels %v; want true and the concurrent label kept", got.Spec.Unschedulable, got.Labels)
	}
	if len(hub.sentPuts()) != 2 {
		t.Errorf("sent %d PUTs, want 2", len(hub.sentPuts()))
	}
}

func TestCordonErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"missing cluster", []string{"cordon", "nope"}, 1, "error: clusters \"nope\" not found\n"},
		{"no name", []string{"uncordon"}, 2, "error: expected exactly one cluster name, got 0 arguments []\nSee 'flotilla uncordon --help' for usage.\n"},
		{"two names", []string{"cordon", "cluster", "edge-1"}, 2, "error: expected exactly one cluster name, got 2 arguments [\"cluster\" \"edge-1\"]\nSee 'flotilla cordon --help' for usage.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newFixtureHub(t)
			r := run(t, hub, tt.args...)
			wantExit(t, r, tt.wantCode)
			if diff := cmp.Diff(tt.want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if len(hub.sentPuts()) != 0 {
				t.Errorf("sent %d PUTs, want none", len(hub.sentPuts()))
			}
		})
	}
}
