package eviction

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func rules(kv ...string) *v1alpha1.StatePreservation {
	sp := &v1alpha1.StatePreservation{}
	for i := 0; i+1 < len(kv); i += 2 {
		sp.Rules = append(sp.Rules, v1alpha1.StatePreservationRule{AliasLabelName: kv[i], JSONPath: kv[i+1]})
	}
	return sp
}

func statusIn(cluster, raw string) v1alpha1.AggregatedStatusItem {
	item := v1alpha1.AggregatedStatusItem{ClusterName: cluster}
	if raw != "" {
		item.Status = &runtime.RawExtension{Raw: []byte(raw)}
	}
	return item
}

// readIn is cluster's item with status raw and the values its agent read.
func readIn(cluster, raw string, kv ...string) v1alpha1.AggregatedStatusItem {
	item := statusIn(cluster, raw)
	item.StateValues = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		item.StateValues[kv[i]] = kv[i+1]
	}
	return item
}

// Karmada's Test_extractStateForEviction and Test_buildTaskOptions (the
// state part), with Flotilla's bounds on what an agent reports.
func TestStateFor(t *testing.T) {
	labelsStatus := `{"metadata": {"labels": {"foo": "bar"}}}`
	tests := []struct {
		name    string
		rules   *v1alpha1.StatePreservation
		items   []v1alpha1.AggregatedStatusItem
		want    map[string]string
		wantErr string // "" = none
		notYet  bool   // ErrStatusNotCollected
	}{
		{"no rules", nil, nil, nil, "", false},
		{"empty rules", &v1alpha1.StatePreservation{}, []v1alpha1.AggregatedStatusItem{statusIn("member1", labelsStatus)}, nil, "", false},
		{"cluster not in the aggregated status", rules("foo", "{ .metadata.labels.foo }"),
			[]v1alpha1.AggregatedStatusItem{statusIn("member2", labelsStatus)}, nil, "not been collected from the cluster member1", true},
		{"cluster without status", rules("foo", "{ .metadata.labels.foo }"),
			[]v1alpha1.AggregatedStatusItem{statusIn("member1", "")}, nil, "not been collected", true},
		{"extracted", rules("foo", "{ .metadata.labels.foo }"),
			[]v1alpha1.AggregatedStatusItem{statusIn("member1", labelsStatus)}, map[string]string{"foo": "bar"}, "", false},
		{"several rules, the failed cluster's status", rules("key-a", "{ .replicas }", "key-b", "{ .health }"),
			[]v1alpha1.AggregatedStatusItem{statusIn("member2", `{"replicas": 3, "health": false}`), statusIn("member1", `{"replicas": 2, "health": true}`)},
			map[string]string{"key-a": "2", "key-b": "true"}, "", false},
		{"one rule fails: nothing", rules("key-a", "{ .replicas }", "key-b", "{ .notfound }"),
			[]v1alpha1.AggregatedStatusItem{statusIn("member1", `{"replicas": 2}`)}, nil, "rule key-b", false},
		{"not JSON", rules("a", "{.a}"), []v1alpha1.AggregatedStatusItem{statusIn("member1", `{`)}, nil, "read the workload's status", false},
		// What the agent read on the live object (any kind, any field).
		{"value the agent read", rules("job", "{.jobStatus.jobId}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", "", "{.jobStatus.jobId}", "a1b2c3")}, map[string]string{"job": "a1b2c3"}, "", false},
		{"read value first, then the status", rules("job", "{.jobStatus.jobId}", "rev", "{.updateRevision}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", `{"updateRevision": "web-7", "jobStatus": {"jobId": "stale"}}`, "{.jobStatus.jobId}", "a1b2c3")},
			map[string]string{"job": "a1b2c3", "rev": "web-7"}, "", false},
		{"a template the agent could not read, nor the status holds", rules("job", "{.jobStatus.jobId}", "cp", "{.jobStatus.checkpoint}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", `{"replicas": 1}`, "{.jobStatus.jobId}", "a1b2c3")}, nil, "rule cp", false},
		{"read values without a status", rules("job", "{.jobStatus.jobId}", "cp", "{.cp}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", "", "{.jobStatus.jobId}", "a1b2c3")}, nil, "rule cp", false},
		{"hostile read value: refused, not cut", rules("job", "{.jobStatus.jobId}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", "", "{.jobStatus.jobId}", strings.Repeat("x", 200)+"/../\n")}, nil, "not a valid label value", false},
		{"read value with characters no label holds", rules("job", "{.jobStatus.jobId}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member1", "", "{.jobStatus.jobId}", "a b")}, nil, "not a valid label value", false},
		{"read values of another cluster", rules("job", "{.jobStatus.jobId}"),
			[]v1alpha1.AggregatedStatusItem{readIn("member2", "", "{.jobStatus.jobId}", "a1b2c3")}, nil, "not been collected", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StateFor(tt.rules, tt.items, "member1")
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrStatusNotCollected) != tt.notYet {
				t.Errorf("errors.Is(err, ErrStatusNotCollected) = %v, want %v", !tt.notYet, tt.notYet)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// Karmada's Test_BuildPreservedLabelState, and values no label can hold.
func TestPreservedLabels(t *testing.T) {
	tests := []struct {
		name    string
		rules   *v1alpha1.StatePreservation
		status  string
		want    map[string]string
		wantErr string
	}{
		{"successful", rules("key-a", "{ .replicas }", "key-b", "{ .health }"), `{"replicas": 2, "health": true}`,
			map[string]string{"key-a": "2", "key-b": "true"}, ""},
		{"a field not found", rules("key-a", "{ .replicas }", "key-b", "{ .notfound }"), `{"replicas": 2, "health": true}`, nil, "notfound is not found"},
		{"invalid JSONPath", rules("key-a", "{ .replicas }", "key-b", "{ %health }"), `{"replicas": 2, "health": true}`, nil, "parse JSONPath"},
		{"a revision", rules("rev", "{.updateRevision}"), `{"updateRevision": "web-5d8c7b9f4"}`, map[string]string{"rev": "web-5d8c7b9f4"}, ""},
		{"empty value", rules("rev", "{.updateRevision}"), `{"updateRevision": ""}`, map[string]string{"rev": ""}, ""},
		// A list, not an object: JSONPath walks an object's keys in random order.
		{"several values are no label value", rules("v", "{ .items[*].resourceVersion }"), `{"items": [{"resourceVersion": "1"}, {"resourceVersion": "2"}]}`,
			nil, `rule v: value "1 2" is not a valid label value`},
		{"too long: refused, not truncated", rules("v", "{.x}"), `{"x": "` + strings.Repeat("a", 64) + `"}`, nil, "must be no more than 63"},
		{"63 characters", rules("v", "{.x}"), `{"x": "` + strings.Repeat("a", 63) + `"}`, map[string]string{"v": strings.Repeat("a", 63)}, ""},
		{"a huge value is not built", rules("v", "{.x}"), `{"x": "` + strings.Repeat("a", 1<<20) + `"}`, nil, "not a valid label value"},
		{"characters a label cannot hold", rules("v", "{.x}"), `{"x": "a/b c"}`, nil, "not a valid label value"},
		{"an object", rules("v", "{.x}"), `{"x": {"y": 1}}`, nil, "not a valid label value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PreservedLabels(tt.rules, []byte(tt.status))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long: an agent's value must not fill events", len(err.Error()))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// Karmada's injectReservedLabelState restrictions.
func TestInjectedLabels(t *testing.T) {
	state := map[string]string{"rev": "web-7"}
	task := func(from, mode string, before ...string) v1alpha1.GracefulEvictionTask {
		return v1alpha1.GracefulEvictionTask{FromCluster: from, PurgeMode: mode, PreservedLabelState: state, ClustersBeforeFailover: before}
	}
	tests := []struct {
		name    string
		spec    v1alpha1.ResourceBindingSpec
		cluster string
		want    map[string]string
	}{
		{"moved from one cluster to another", withTasks(placed("b", 1), task("a", v1alpha1.PurgeModeDirectly, "a")), "b", state},
		{"no task", placed("b", 1), "b", nil},
		{"two target clusters", withTasks(placed("b", 1, "c", 1), task("a", v1alpha1.PurgeModeDirectly, "a")), "b", nil},
		{"Gracefully", withTasks(placed("b", 1), task("a", v1alpha1.PurgeModeGracefully, "a")), "b", nil},
		{"Never", withTasks(placed("b", 1), task("a", v1alpha1.PurgeModeNever, "a")), "b", nil},
		{"Immediately is Directly", withTasks(placed("b", 1), task("a", v1alpha1.PurgeModeImmediately, "a")), "b", state},
		{"target ran it before the failover", withTasks(placed("b", 1), task("a", v1alpha1.PurgeModeDirectly, "a", "b")), "b", nil},
		{"the last task counts", withTasks(placed("c", 1),
			task("a", v1alpha1.PurgeModeDirectly, "a"),
			v1alpha1.GracefulEvictionTask{FromCluster: "b", PurgeMode: v1alpha1.PurgeModeDirectly, PreservedLabelState: map[string]string{"rev": "web-8"}, ClustersBeforeFailover: []string{"b"}}),
			"c", map[string]string{"rev": "web-8"}},
		{"the last task has no state", withTasks(placed("c", 1), task("a", v1alpha1.PurgeModeDirectly, "a"),
			v1alpha1.GracefulEvictionTask{FromCluster: "b", PurgeMode: v1alpha1.PurgeModeDirectly}), "c", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, InjectedLabels(&tt.spec, tt.cluster)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

// Karmada's TestObtainBindingSpecExistingClusters, and no purge without a
// replacement.
func TestExistingClustersAndDirectlyPurged(t *testing.T) {
	task := func(from, mode string) v1alpha1.GracefulEvictionTask {
		return v1alpha1.GracefulEvictionTask{FromCluster: from, PurgeMode: mode}
	}
	tests := []struct {
		name         string
		spec         v1alpha1.ResourceBindingSpec
		want, purged []string
	}{
		{"placement only", placed("member1", 1, "member2", 1), []string{"member1", "member2"}, nil},
		{"with a task", withTasks(placed("member1", 1, "member2", 1), task("member4", "")), []string{"member1", "member2", "member4"}, nil},
		{"a task of a placed cluster", withTasks(placed("member1", 1, "member3", 1), task("member3", "")), []string{"member1", "member3"}, nil},
		{"Directly tasks are purged", withTasks(placed("member1", 1, "member2", 1),
			task("member3", v1alpha1.PurgeModeDirectly), task("member4", v1alpha1.PurgeModeGracefully), task("member5", v1alpha1.PurgeModeNever)),
			[]string{"member1", "member2", "member4", "member5"}, []string{"member3"}},
		{"Directly with nothing placed: kept", withTasks(placed(), task("member3", v1alpha1.PurgeModeDirectly)), []string{"member3"}, nil},
		{"Directly placed again: kept", withTasks(placed("member3", 1), task("member3", v1alpha1.PurgeModeDirectly)), []string{"member3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ExistingClusters(&tt.spec)); diff != "" {
				t.Errorf("existing (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.purged, DirectlyPurged(&tt.spec)); diff != "" {
				t.Errorf("purged (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFencedBy(t *testing.T) {
	tests := []struct {
		name             string
		heard            time.Time
		stopAfter, lease time.Duration
		want             time.Time
	}{
		{"stopAfter plus the margin", t0, 120 * time.Second, 40 * time.Second, t0.Add(180 * time.Second)},
		{"never before two renew intervals", t0, 5 * time.Second, 40 * time.Second, t0.Add(80 * time.Second)},
		{"no fencing", t0, 0, 40 * time.Second, time.Time{}},
		{"never heard from", time.Time{}, 120 * time.Second, 40 * time.Second, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FencedBy(tt.heard, tt.stopAfter, tt.lease); !got.Equal(tt.want) {
				t.Errorf("FencedBy = %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzPreservedLabels: whatever an agent reports and whatever the rule,
// evaluating it neither panics nor yields a value no label can hold.
func FuzzPreservedLabels(f *testing.F) {
	f.Add(`{"updateRevision": "web-7"}`, "{.updateRevision}")
	f.Add(`{"a": [1, 2, {"b": "c"}]}`, "{ ..b }")
	f.Add(`{"x": "`+strings.Repeat("z", 100)+`"}`, "{range .x}{@}{end}")
	f.Fuzz(func(t *testing.T, status, path string) {
		got, err := PreservedLabels(rules("k", path), []byte(status))
		if err != nil {
			if got != nil {
				t.Errorf("labels %v with error %v", got, err)
			}
			return
		}
		if msgs := validation.IsValidLabelValue(got["k"]); len(msgs) > 0 {
			t.Errorf("value %q is no label value: %v", got["k"], msgs)
		}
	})
}
