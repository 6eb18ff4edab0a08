package work

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/jsonpathvalue"
	"github.com/flotilla-io/flotilla/protocol"
)

// The statePreservation templates are read on any kind's status; one that
// does not evaluate has no value and fails nothing.
func TestStateValues(t *testing.T) {
	const flink = `{"apiVersion":"flink.apache.org/v1beta1","kind":"FlinkDeployment","metadata":{"name":"f"},
		"status":{"jobStatus":{"jobId":"a1b2c3","state":"RUNNING","savepointInfo":{"lastSavepoint":{"location":"s3-bucket-sp-17"}}},"restarts":3}}`
	long := `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"},"status":{"v":"` + strings.Repeat("v", 1000) + `"}}`
	for _, tc := range []struct {
		name  string
		obj   string
		paths []string
		want  map[string]string
	}{
		{"no templates", flink, nil, nil},
		{"nested fields of a custom resource", flink, []string{"{.jobStatus.jobId}", "{.jobStatus.savepointInfo.lastSavepoint.location}", "{.restarts}"},
			map[string]string{"{.jobStatus.jobId}": "a1b2c3", "{.jobStatus.savepointInfo.lastSavepoint.location}": "s3-bucket-sp-17", "{.restarts}": "3"}},
		{"a missing field has no value", flink, []string{"{.jobStatus.jobId}", "{.jobStatus.checkpoint}"}, map[string]string{"{.jobStatus.jobId}": "a1b2c3"}},
		{"a template that does not parse has no value", flink, []string{"{ %jobId }"}, nil},
		{"no status", `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"}}`, []string{"{.a}"}, nil},
		{"a long value is cut past a label's length", long, []string{"{.v}"}, map[string]string{"{.v}": strings.Repeat("v", jsonpathvalue.MaxBytes)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stateValues(object(t, tc.obj), tc.paths)); diff != "" {
				t.Errorf("state values (-want +got):\n%s", diff)
			}
		})
	}
}

// A change of a state value alone is news for the hub.
func TestSameResultsComparesStateValues(t *testing.T) {
	a := []protocol.ManifestResult{{Name: "f", Health: protocol.HealthHealthy, StateValues: map[string]string{"{.id}": "1"}}}
	b := []protocol.ManifestResult{{Name: "f", Health: protocol.HealthHealthy, StateValues: map[string]string{"{.id}": "2"}}}
	if sameResults(a, b) {
		t.Error("results with different state values are the same")
	}
	if !sameResults(a, []protocol.ManifestResult{{Name: "f", Health: protocol.HealthHealthy, StateValues: map[string]string{"{.id}": "1"}}}) {
		t.Error("equal results differ")
	}
}
