package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestGetTables(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "clusters",
			args: []string{"get", "clusters"},
			want: `NAME     READY     TAINTS                                                                  VERSION   NODES   AGE
edge-1   True      <none>                                                                  v1.31.2   3/3     0s
edge-2   Unknown   unreachable:NoSchedule,unschedulable:NoSchedule,team:PreferNoSchedule   v1.30.4   2/4     0s
lab      -         <none>                                                                  -         -       0s
`,
		},
		{
			name: "one cluster, singular resource name",
			args: []string{"get", "cluster", "edge-1"},
			want: `NAME     READY   TAINTS   VERSION   NODES   AGE
edge-1   True    <none>   v1.31.2   3/3     0s
`,
		},
		{
			name: "clusters wide",
			args: []string{"get", "clusters", "-o", "wide"},
			want: `NAME     READY     TAINTS                                                                  VERSION   NODES   AGE   PROVIDER   REGION      ZONE         AGENT    CONNECTED-TO   SCHEDULING
edge-1   True      <none>                                                                  v1.31.2   3/3     0s    aws        eu-west-1   eu-west-1a   v0.1.0   hub-0          Schedulable
edge-2   Unknown   unreachable:NoSchedule,unschedulable:NoSchedule,team:PreferNoSchedule   v1.30.4   2/4     0s    onprem     -           -            v0.1.0   -              Unschedulable
lab      -         <none>                                                                  -         -       0s    -          -           -            -        -              Schedulable
`,
		},
		{
			name: "leases",
			args: []string{"get", "leases"},
			want: `NAME     HOLDER              RENEWED   DURATION   STATE
edge-1   edge-1-agent-7c9f   3s        40s        fresh
edge-2   edge-2-agent-a1     95s       40s        expired
lab      -                   25s       40s        late
`,
		},
		{
			name: "leases wide, flags before the command",
			args: []string{"--timeout", "5s", "get", "-o", "wide", "leases"},
			want: `NAME     HOLDER              RENEWED   DURATION   STATE     ACQUIRED   TRANSITIONS
edge-1   edge-1-agent-7c9f   3s        40s        fresh     120m       1
edge-2   edge-2-agent-a1     95s       40s        expired   120m       0
lab      -                   25s       40s        late      120m       0
`,
		},
		{
			name: "one lease",
			args: []string{"get", "lease", "lab"},
			want: `NAME   HOLDER   RENEWED   DURATION   STATE
lab    -        25s       40s        late
`,
		},
	}
	f := newFixtureHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.run(t, tt.args...)
			wantExit(t, r, 0)
			if diff := cmp.Diff(tt.want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// Ages count from creationTimestamp, as kubectl's do (the API server stamps
// it with its own clock, so this test feeds the table a list directly).
func TestGetTablesAgeFromCreation(t *testing.T) {
	raw := `{"items":[
		{"metadata":{"name":"old","creationTimestamp":"2026-04-28T12:00:00Z"}},
		{"metadata":{"name":"newer","creationTimestamp":"2026-05-01T11:15:00Z"}},
		{"metadata":{"name":"new","creationTimestamp":"2026-05-01T11:59:50Z"}},
		{"metadata":{"name":"never"}}]}`
	tbl, err := clustersTable([]byte(raw), tableOptions{now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	var ages []string
	for _, row := range tbl.rows {
		ages = append(ages, row[0]+" "+row[len(row)-1])
	}
	if diff := cmp.Diff([]string{"old 3d", "newer 45m", "new 10s", "never <unknown>"}, ages); diff != "" {
		t.Errorf("ages (-want +got):\n%s", diff)
	}
}

// -o json and -o yaml print what the hub sent, fields flotilla does not
// know included (a newer hub's), without managedFields.
func TestGetRawOutput(t *testing.T) {
	f := newFixtureHub(t)
	// A newer hub: its answers carry a status field this flotilla does not
	// know.
	f.setAnswered(func(req *http.Request, resp *http.Response) {
		if req.URL.Path != "/apis/flotilla.io/v1alpha1/clusters/edge-1" {
			return
		}
		var obj map[string]any
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Errorf("answer: %v", err)
		}
		obj["status"].(map[string]any)["futureField"] = map[string]any{"b": 1, "a": []any{true}}
		body, _ = json.Marshal(obj)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	})
	for _, output := range []string{"json", "yaml"} {
		t.Run(output, func(t *testing.T) {
			r := f.run(t, "get", "cluster", "edge-1", "-o", output)
			wantExit(t, r, 0)
			var got struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name          string `json:"name"`
					ManagedFields []any  `json:"managedFields"`
				} `json:"metadata"`
				Status struct {
					KubernetesVersion string         `json:"kubernetesVersion"`
					FutureField       map[string]any `json:"futureField"`
				} `json:"status"`
			}
			if err := yaml.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("output is not %s: %v\n%s", output, err, r.stdout)
			}
			if got.Kind != "Cluster" || got.Metadata.Name != "edge-1" || got.Status.KubernetesVersion != "v1.31.2" {
				t.Errorf("output is not the edge-1 Cluster:\n%s", r.stdout)
			}
			if diff := cmp.Diff(map[string]any{"a": []any{true}, "b": float64(1)}, got.Status.FutureField); diff != "" {
				t.Errorf("status.futureField (-want +got):\n%s", diff)
			}
			if got.Metadata.ManagedFields != nil || strings.Contains(r.stdout, "managedFields") {
				t.Errorf("output has managedFields:\n%s", r.stdout)
			}
		})
	}
	r := f.run(t, "get", "cluster", "edge-1", "-o", "yaml")
	if !strings.Contains(r.stdout, "  futureField:\n    a:\n    - true\n    b: 1\n") {
		t.Errorf("YAML is not readable block style:\n%s", r.stdout)
	}
}

func TestGetListJSON(t *testing.T) {
	f := newFixtureHub(t)
	r := f.run(t, "get", "clusters", "-o", "json")
	wantExit(t, r, 0)
	if !strings.HasSuffix(r.stdout, "\n}\n") || !strings.HasPrefix(r.stdout, "{\n    \"apiVersion\"") {
		t.Errorf("output is not indented JSON ending in one newline:\n%s", r.stdout)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata["name"].(string))
		if _, ok := it.Metadata["managedFields"]; ok {
			t.Errorf("item %s has managedFields", it.Metadata["name"])
		}
	}
	if list.Kind != "ClusterList" || !cmp.Equal([]string{"edge-1", "edge-2", "lab"}, names) {
		t.Errorf("kind %q, items %v", list.Kind, names)
	}
}

func TestGetSingleObjectJSON(t *testing.T) {
	f := newFixtureHub(t)
	r := f.run(t, "get", "lease", "edge-1", "-o", "json")
	wantExit(t, r, 0)
	if !strings.HasSuffix(r.stdout, "\n}\n") {
		t.Errorf("output does not end in exactly one newline: %q", r.stdout[max(0, len(r.stdout)-10):])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
	if got["kind"] != "Lease" || got["metadata"].(map[string]any)["name"] != "edge-1" {
		t.Errorf("output is not the edge-1 Lease:\n%s", r.stdout)
	}
}

func TestGetEmptyList(t *testing.T) {
	h := newHub(t)
	r := h.run(t, "get", "clusters")
	wantExit(t, r, 0)
	if r.stdout != "" || r.stderr != "No clusters found.\n" {
		t.Errorf("stdout %q, stderr %q; want nothing and %q", r.stdout, r.stderr, "No clusters found.\n")
	}
}

func TestGetNotFound(t *testing.T) {
	f := newFixtureHub(t)
	r := f.run(t, "get", "clusters", "nope")
	wantExit(t, r, 1)
	if diff := cmp.Diff("error: clusters.flotilla.io \"nope\" not found\n", r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GET /apis/flotilla.io/v1alpha1/clusters/nope"}, f.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
