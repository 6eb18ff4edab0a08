package jsonpathvalue

import (
	"strings"
	"testing"
)

// Karmada's Test_parseJSONValue: what kubectl's JSONPath supports.
func TestFromJSON(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[` +
		`{"kind":"Deployment","metadata":{"name":"nginx-01","namespace":"default","resourceVersion":"1148"},"status":{"replicas":2}},` +
		`{"kind":"Deployment","metadata":{"name":"nginx-02","namespace":"default","resourceVersion":"1149"},"status":{"replicas":2}}]}`
	tests := []struct {
		name, raw, path, want string
		wantErr               bool
	}{
		{"target field not found", `{"readyReplicas": 2}`, "{ .replicas }", "", true},
		{"invalid JSONPath", `{"readyReplicas": 2}`, "{ %replicas }", "", true},
		{"not JSON", `{"readyReplicas"`, "{ .readyReplicas }", "", true},
		{"parsed", `{"replicas": 2}`, "{ .replicas }", "2", false},
		{"nested", `{"jobStatus":{"checkpointInfo":{"lastPeriodicCheckpointTimestamp":1700000000}}}`,
			"{.jobStatus.checkpointInfo.lastPeriodicCheckpointTimestamp}", "1700000000", false},
		{"child operator", list, "{ ['kind'] }", "List", false},
		{"recursive descent", list, "{ ..resourceVersion }", "1148 1149", false},
		{"wildcard", list, "{ .items[*].metadata.name }", "nginx-01 nginx-02", false},
		{"subscript", list, "{ .items[0].metadata.name }", "nginx-01", false},
		{"filter", list, `{ .items[?(@.metadata.name=="nginx-01")].metadata.name }`, "nginx-01", false},
		{"range", list, "{range .items[*]}[{.metadata.name}, {.metadata.namespace}] {end}", "[nginx-01, default] [nginx-02, default] ", false},
		{"long value cut at MaxBytes", `{"v":"` + strings.Repeat("x", 10000) + `"}`, "{.v}", strings.Repeat("x", MaxBytes), false},
		{"long range cut at MaxBytes", `{"a":[` + strings.Repeat(`"ab",`, 1000) + `"ab"]}`, "{range .a[*]}{@}{end}", strings.Repeat("ab", MaxBytes/2), false},
		{"filter on a number", `{"a":[{"n":1,"v":"x"},{"n":2,"v":"y"}]}`, "{.a[?(@.n==2)].v}", "y", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromJSON([]byte(tt.raw), tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want an error: %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("value = %q, want %q", got, tt.want)
			}
		})
	}
}

// The agent evaluates on an unstructured object's status, whose numbers
// are int64, not float64 as from encoding/json.
func TestEvalUnstructured(t *testing.T) {
	status := map[string]any{"jobStatus": map[string]any{"jobId": "a1b2", "restarts": int64(3)}, "list": []any{"x", "y"}}
	tests := []struct{ path, want string }{
		{"{.jobStatus.jobId}", "a1b2"},
		{"{.jobStatus.restarts}", "3"},
		{"{.list[1]}", "y"},
	}
	for _, tt := range tests {
		got, err := Eval(status, tt.path)
		if err != nil || got != tt.want {
			t.Errorf("Eval(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
	if _, err := Eval(status, "{.jobStatus.missing}"); err == nil {
		t.Error("a missing key evaluated without an error")
	}
}

// FuzzFromJSON: whatever the document and the template, evaluating
// neither panics nor prints more than MaxBytes.
func FuzzFromJSON(f *testing.F) {
	f.Add(`{"a":{"b":"c"}}`, "{.a.b}")
	f.Add(`{"a":[1,2,3]}`, "{range .a[*]}{@}{end}")
	f.Add(`{"a":"x"}`, "{..a}")
	f.Fuzz(func(t *testing.T, doc, template string) {
		got, _ := FromJSON([]byte(doc), template)
		if len(got) > MaxBytes {
			t.Fatalf("printed %d bytes, more than %d", len(got), MaxBytes)
		}
	})
}
