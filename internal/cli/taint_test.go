package cli

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// taintsOf is the stored taints of a cluster, timeAdded left out.
func taintsOf(t *testing.T, h *testHub, name string) []string {
	t.Helper()
	var out []string
	for _, tt := range h.cluster(t, name).Spec.Taints {
		out = append(out, taintString(tt))
	}
	return out
}

func TestTaint(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStdout string
		wantTaints []string // edge-2's taints afterwards
		wantPut    bool
	}{
		{
			name:       "add with value",
			args:       []string{"maintenance=planned:NoSchedule"},
			wantStdout: "cluster/edge-2 tainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"team=payments:PreferNoSchedule", "maintenance=planned:NoSchedule"},
			wantPut: true,
		},
		{
			name:       "add without value, same key with another effect",
			args:       []string{"team:NoExecute"},
			wantStdout: "cluster/edge-2 tainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"team=payments:PreferNoSchedule", "team:NoExecute"},
			wantPut: true,
		},
		{
			name:       "identical taint is a no-op",
			args:       []string{"team=payments:PreferNoSchedule"},
			wantStdout: "cluster/edge-2 already tainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"team=payments:PreferNoSchedule"},
		},
		{
			name:       "overwrite a value",
			args:       []string{"team=search:PreferNoSchedule", "--overwrite"},
			wantStdout: "cluster/edge-2 tainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"team=search:PreferNoSchedule"},
			wantPut: true,
		},
		{
			name:       "remove by key and effect",
			args:       []string{"team:PreferNoSchedule-"},
			wantStdout: "cluster/edge-2 untainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule"},
			wantPut:    true,
		},
		{
			name:       "remove by key",
			args:       []string{"team-"},
			wantStdout: "cluster/edge-2 untainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule"},
			wantPut:    true,
		},
		{
			name:       "add and remove at once",
			args:       []string{"team-", "maintenance:NoSchedule"},
			wantStdout: "cluster/edge-2 tainted\n",
			wantTaints: []string{"cluster.flotilla.io/unreachable:NoSchedule", "cluster.flotilla.io/unschedulable:NoSchedule",
				"maintenance:NoSchedule"},
			wantPut: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixtureHub(t)
			r := f.run(t, append([]string{"taint", "cluster", "edge-2"}, tt.args...)...)
			wantExit(t, r, 0)
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
			if diff := cmp.Diff(tt.wantTaints, taintsOf(t, f.testHub, "edge-2")); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if updates, _ := f.updates(); (len(updates) > 0) != tt.wantPut {
				t.Errorf("updates %q, want one: %t", updates, tt.wantPut)
			}
		})
	}
}

// New taints go out without timeAdded for the hub (its admission) to
// stamp; the others keep theirs.
func TestTaintLeavesTimeAddedToHub(t *testing.T) {
	f := newFixtureHub(t)
	r := f.run(t, "taint", "cluster", "edge-2", "maintenance=planned:NoExecute", "team=search:PreferNoSchedule", "--overwrite")
	wantExit(t, r, 0)
	updates, bodies := f.updates()
	if len(updates) != 1 {
		t.Fatalf("sent %d updates, want 1: %q", len(updates), updates)
	}
	var sent v1alpha1.Cluster
	if err := json.Unmarshal([]byte(bodies[0]), &sent); err != nil {
		t.Fatal(err)
	}
	if sent.ResourceVersion == "" {
		t.Errorf("the update carries no resourceVersion: %s", bodies[0])
	}
	stamped := map[string]bool{}
	for _, tt := range sent.Spec.Taints {
		stamped[taintString(tt)] = tt.TimeAdded != nil
	}
	want := map[string]bool{
		"cluster.flotilla.io/unreachable:NoSchedule":   true,
		"cluster.flotilla.io/unschedulable:NoSchedule": true,
		"team=search:PreferNoSchedule":                 false,
		"maintenance=planned:NoExecute":                false,
	}
	if diff := cmp.Diff(want, stamped); diff != "" {
		t.Errorf("taints with timeAdded in the update (-want +got):\n%s", diff)
	}
}

// Errors that depend on the cluster's taints: exit 1, nothing written.
func TestTaintStateErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "new value without --overwrite",
			args: []string{"team=search:PreferNoSchedule"},
			want: `error: cluster "edge-2" already has taint team=payments:PreferNoSchedule; use --overwrite to replace it with team=search:PreferNoSchedule` + "\n",
		},
		{
			name: "remove an absent key and effect",
			args: []string{"team:NoSchedule-"},
			want: `error: cluster "edge-2" has no taint team:NoSchedule (from "team:NoSchedule-")` + "\n",
		},
		{
			name: "remove an absent key",
			args: []string{"team-", "gpu-"},
			want: `error: cluster "edge-2" has no taint with key "gpu" (from "gpu-")` + "\n",
		},
	}
	f := newFixtureHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.cluster(t, "edge-2").ResourceVersion
			r := f.run(t, append([]string{"taint", "cluster", "edge-2"}, tt.args...)...)
			wantExit(t, r, 1)
			if diff := cmp.Diff(tt.want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if writes := f.writes(); len(writes) != 0 {
				t.Errorf("sent %q, want no write", writes)
			}
			if after := f.cluster(t, "edge-2").ResourceVersion; after != before {
				t.Errorf("resourceVersion %s -> %s", before, after)
			}
		})
	}
}

// Bad arguments are usage errors that name the argument and the reason,
// and nothing is sent to the hub.
func TestTaintUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no taints", []string{"cluster", "edge-1"}, "missing taints: give at least one of key=value:Effect, key:Effect, key:Effect- or key-"},
		{"no name", []string{"cluster"}, "missing the cluster name; expected: cluster NAME"},
		{"nothing", nil, "missing the resource type and name; expected: cluster NAME"},
		{"wrong resource", []string{"node", "edge-1", "a:NoSchedule"}, `unknown resource type "node"; supported: cluster`},
		{"bad name", []string{"cluster", "a/b", "a:NoSchedule"}, `invalid name "a/b": may not contain '/'`},
		{"bad effect", []string{"cluster", "edge-1", "gpu=yes:Sometimes"}, `invalid taint "gpu=yes:Sometimes": effect "Sometimes" is not one of NoSchedule, PreferNoSchedule, NoExecute, PreferNoExecute`},
		{"empty effect", []string{"cluster", "edge-1", "gpu=yes:"}, `invalid taint "gpu=yes:": effect "" is not one of NoSchedule, PreferNoSchedule, NoExecute, PreferNoExecute`},
		{"bad effect on removal", []string{"cluster", "edge-1", "gpu:Never-"}, `invalid taint "gpu:Never-": effect "Never" is not one of`},
		{"missing effect", []string{"cluster", "edge-1", "gpu=yes"}, `invalid taint "gpu=yes": missing ':Effect' (one of NoSchedule, PreferNoSchedule, NoExecute, PreferNoExecute); to remove every taint with this key write "gpu-"`},
		{"bad key", []string{"cluster", "edge-1", "bad key:NoSchedule"}, `invalid taint "bad key:NoSchedule": key "bad key": name part must consist of alphanumeric characters`},
		{"empty key", []string{"cluster", "edge-1", "=x:NoSchedule"}, `invalid taint "=x:NoSchedule": key "": name part must be non-empty`},
		{"bad value", []string{"cluster", "edge-1", "gpu=no way:NoSchedule"}, `invalid taint "gpu=no way:NoSchedule": value "no way": a valid label must be`},
		{"two colons", []string{"cluster", "edge-1", "a:b:NoSchedule"}, `invalid taint "a:b:NoSchedule": more than one ':'`},
		{"two equals", []string{"cluster", "edge-1", "a=b=c:NoSchedule"}, `invalid taint "a=b=c:NoSchedule": more than one '='`},
		{"value on key removal", []string{"cluster", "edge-1", "a=b-"}, `invalid taint "a=b-": a removal is key:Effect- or key-, without a value`},
		{"unschedulable key", []string{"cluster", "edge-1", "cluster.flotilla.io/unschedulable:NoSchedule"}, `invalid taint "cluster.flotilla.io/unschedulable:NoSchedule": the hub maintains cluster.flotilla.io/unschedulable from spec.unschedulable: use 'flotilla cordon' or 'flotilla uncordon'`},
		{"add and remove the same", []string{"cluster", "edge-1", "gpu=yes:NoSchedule", "gpu-"}, `invalid taint "gpu-": "gpu=yes:NoSchedule" changes the same taint; cannot both add and remove it`},
		{"the same twice", []string{"cluster", "edge-1", "gpu=yes:NoSchedule", "gpu=no:NoSchedule"}, `invalid taint "gpu=no:NoSchedule": "gpu=yes:NoSchedule" already names this key and effect`},
		{"unknown flag", []string{"cluster", "edge-1", "gpu:NoSchedule", "--force"}, "unknown flag: --force"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, append([]string{"taint"}, tt.args...)...)
			wantExit(t, r, 2)
			if !strings.HasPrefix(r.stderr, "error: "+tt.want) {
				t.Errorf("stderr = %q, want it to start with %q", r.stderr, "error: "+tt.want)
			}
			if !strings.HasSuffix(r.stderr, "See 'flotilla taint --help' for usage.\n") {
				t.Errorf("stderr = %q, want the --help hint", r.stderr)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}

// The hub's health taints are refused, to add and to remove, whatever the
// effect and in Karmada's spelling too: a usage error that says why and
// what to do instead, and nothing is sent to the hub.
func TestTaintRefusesHubKeys(t *testing.T) {
	const (
		offHint     = "to keep workloads off the cluster use 'flotilla cordon', or a taint with a key of your own, e.g. example.com/maintenance=planned:NoSchedule"
		notReady    = "the hub sets and clears cluster.flotilla.io/not-ready itself, from the cluster's health, while Ready is False; "
		unreachable = "the hub sets and clears cluster.flotilla.io/unreachable itself, from the cluster's health, while Ready is Unknown (its lease expired); "
		terminating = "the hub sets and clears cluster.flotilla.io/terminating itself, on a cluster being deleted; "
	)
	tests := []struct {
		name string
		args []string
		want string // the error, without "error: " and the --help hint
	}{
		{"add not-ready", []string{"cluster.flotilla.io/not-ready:NoSchedule"},
			`invalid taint "cluster.flotilla.io/not-ready:NoSchedule": ` + notReady + offHint},
		{"add unreachable with a value", []string{"cluster.flotilla.io/unreachable=yes:NoExecute"},
			`invalid taint "cluster.flotilla.io/unreachable=yes:NoExecute": ` + unreachable + offHint},
		{"add terminating", []string{"cluster.flotilla.io/terminating:NoExecute"},
			`invalid taint "cluster.flotilla.io/terminating:NoExecute": ` + terminating + offHint},
		{"remove unreachable by key and effect", []string{"cluster.flotilla.io/unreachable:NoSchedule-"},
			`invalid taint "cluster.flotilla.io/unreachable:NoSchedule-": ` + unreachable +
				"to keep a workload on the cluster while it has the taint, give its policy a toleration of cluster.flotilla.io/unreachable"},
		{"remove not-ready by key", []string{"cluster.flotilla.io/not-ready-"},
			`invalid taint "cluster.flotilla.io/not-ready-": ` + notReady +
				"to keep a workload on the cluster while it has the taint, give its policy a toleration of cluster.flotilla.io/not-ready"},
		{"after an operator's taint", []string{"gpu=yes:NoSchedule", "cluster.flotilla.io/terminating-"},
			`invalid taint "cluster.flotilla.io/terminating-": ` + terminating +
				"to keep a workload on the cluster while it has the taint, give its policy a toleration of cluster.flotilla.io/terminating"},
		{"Karmada's not-ready", []string{"cluster.karmada.io/not-ready:NoExecute"},
			`invalid taint "cluster.karmada.io/not-ready:NoExecute": cluster.karmada.io/not-ready is Karmada's spelling of cluster.flotilla.io/not-ready, and ` +
				notReady + offHint},
		{"Karmada's unschedulable", []string{"cluster.karmada.io/unschedulable-"},
			`invalid taint "cluster.karmada.io/unschedulable-": cluster.karmada.io/unschedulable is Karmada's spelling of cluster.flotilla.io/unschedulable, and ` +
				"the hub maintains cluster.flotilla.io/unschedulable from spec.unschedulable: use 'flotilla cordon' or 'flotilla uncordon'"},
	}
	f := newFixtureHub(t)
	before := taintsOf(t, f.testHub, "edge-2")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t, append([]string{"taint", "cluster", "edge-2"}, tt.args...)...)
			wantExit(t, r, 2)
			want := "error: " + tt.want + "\nSee 'flotilla taint --help' for usage.\n"
			if diff := cmp.Diff(want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if sent := f.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
	if diff := cmp.Diff(before, taintsOf(t, f.testHub, "edge-2")); diff != "" {
		t.Errorf("taints changed (-before +after):\n%s", diff)
	}
}

// Other keys under the hub's prefixes are operators' to use.
func TestTaintOtherKeysOfHubPrefixes(t *testing.T) {
	for _, key := range []string{"cluster.flotilla.io/maintenance", "cluster.karmada.io/maintenance", "example.com/not-ready"} {
		if err := checkHubKey(key, false); err != nil {
			t.Errorf("checkHubKey(%q) = %v, want nil", key, err)
		}
	}
}

// A concurrent writer adds a taint between flotilla's read and write: the
// write conflicts, and the retry keeps the other writer's taint.
func TestTaintRetriesOnConflict(t *testing.T) {
	f := newFixtureHub(t)
	f.concurrentWriter(t, "edge-1", 1, func(cl *v1alpha1.Cluster) {
		cl.Spec.Taints = append(cl.Spec.Taints, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule, TimeAdded: agoPtr(0)})
	})
	r := f.run(t, "taint", "cluster", "edge-1", "gpu=yes:NoSchedule")
	wantExit(t, r, 0)
	if r.stdout != "cluster/edge-1 tainted\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	path := clusterPath + "edge-1"
	want := []string{"GET " + path, "PUT " + path + "?fieldManager=flotilla", "GET " + path, "PUT " + path + "?fieldManager=flotilla"}
	if diff := cmp.Diff(want, f.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"other:NoSchedule", "gpu=yes:NoSchedule"}, taintsOf(t, f.testHub, "edge-1")); diff != "" {
		t.Errorf("taints (-want +got): the retry must keep the concurrent change\n%s", diff)
	}
}

// The re-applied change is checked against the fresh copy: a taint that a
// concurrent writer removed is reported missing.
func TestTaintRetryRevalidates(t *testing.T) {
	f := newFixtureHub(t)
	f.concurrentWriter(t, "edge-2", 1, func(cl *v1alpha1.Cluster) { cl.Spec.Taints = nil })
	r := f.run(t, "taint", "cluster", "edge-2", "team-")
	wantExit(t, r, 1)
	if want := "error: cluster \"edge-2\" has no taint with key \"team\" (from \"team-\")\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestTaintGivesUpAfterFiveConflicts(t *testing.T) {
	f := newFixtureHub(t)
	n := 0
	f.concurrentWriter(t, "edge-1", 5, func(cl *v1alpha1.Cluster) {
		n++
		cl.Labels["writes"] = strconv.Itoa(n)
	})
	r := f.run(t, "taint", "cluster", "edge-1", "gpu=yes:NoSchedule")
	wantExit(t, r, 1)
	want := `error: cluster "edge-1" kept changing under us: gave up after 5 attempts: Operation cannot be fulfilled on clusters.flotilla.io "edge-1"`
	if !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr = %q, want it to start with %q", r.stderr, want)
	}
	if updates, _ := f.updates(); len(updates) != 5 {
		t.Errorf("sent %d updates, want 5", len(updates))
	}
	if got := taintsOf(t, f.testHub, "edge-1"); len(got) != 0 {
		t.Errorf("taints %v, want none", got)
	}
}

func TestApplyTaints(t *testing.T) {
	stamp := metav1.NewTime(testNow)
	existing := []corev1.Taint{
		{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &stamp},
		{Key: "a", Effect: corev1.TaintEffectNoExecute, TimeAdded: &stamp},
		{Key: "b", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &stamp},
	}
	tests := []struct {
		name      string
		args      []string
		overwrite bool
		want      []corev1.Taint
		wantVerb  string
	}{
		{"remove key", []string{"a-"}, false, existing[2:], "untainted"},
		{"remove key and effect", []string{"a:NoExecute-"}, false, []corev1.Taint{existing[0], existing[2]}, "untainted"},
		{"removal ignores the value", []string{"a=zzz:NoSchedule-"}, false, existing[1:], "untainted"},
		{"no-op", []string{"a=1:NoSchedule", "b:NoSchedule"}, false, existing, "already tainted"},
		{"overwrite clears timeAdded", []string{"a=2:NoSchedule"}, true, []corev1.Taint{
			{Key: "a", Value: "2", Effect: corev1.TaintEffectNoSchedule}, existing[1], existing[2],
		}, "tainted"},
		{"add", []string{"c=3:PreferNoSchedule"}, false, append(existing[:3:3],
			corev1.Taint{Key: "c", Value: "3", Effect: corev1.TaintEffectPreferNoSchedule}), "tainted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes, err := parseTaintArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := applyTaints("c1", existing, changes, tt.overwrite)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if got.verb() != tt.wantVerb {
				t.Errorf("verb = %q, want %q", got.verb(), tt.wantVerb)
			}
		})
	}
	if existing[0].Value != "1" || len(existing) != 3 {
		t.Errorf("applyTaints changed its input: %v", existing)
	}
}
