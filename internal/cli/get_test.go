package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
edge-1   True      <none>                                                                  v1.31.2   3/3     3d
edge-2   Unknown   unreachable:NoSchedule,unschedulable:NoSchedule,team:PreferNoSchedule   v1.30.4   2/4     45m
lab      -         <none>                                                                  -         -       10s
`,
		},
		{
			name: "one cluster, singular resource name",
			args: []string{"get", "cluster", "edge-1"},
			want: `NAME     READY   TAINTS   VERSION   NODES   AGE
edge-1   True    <none>   v1.31.2   3/3     3d
`,
		},
		{
			name: "clusters wide",
			args: []string{"get", "clusters", "-o", "wide"},
			want: `NAME     READY     TAINTS                                                                  VERSION   NODES   AGE   PROVIDER   REGION      ZONE         AGENT    CONNECTED-TO   SCHEDULING
edge-1   True      <none>                                                                  v1.31.2   3/3     3d    aws        eu-west-1   eu-west-1a   v0.1.0   hub-0          Schedulable
edge-2   Unknown   unreachable:NoSchedule,unschedulable:NoSchedule,team:PreferNoSchedule   v1.30.4   2/4     45m   onprem     -           -            v0.1.0   -              Unschedulable
lab      -         <none>                                                                  -         -       10s   -          -           -            -        -              Schedulable
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, newFixtureHub(t), tt.args...)
			wantExit(t, r, 0)
			if diff := cmp.Diff(tt.want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// rawHub answers every request with body, to check that -o json and -o
// yaml print what the hub sent, fields flotilla does not know included.
func rawHub(t *testing.T, body string) *fakeHub {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &fakeHub{Server: srv}
}

const rawClusterList = `{"apiVersion":"flotilla.io/v1alpha1","kind":"ClusterList","metadata":{"resourceVersion":"7"},` +
	`"items":[{"apiVersion":"flotilla.io/v1alpha1","kind":"Cluster","metadata":{"name":"edge-1"},` +
	`"spec":{"region":"eu"},"status":{"futureField":{"b":1,"a":[true]}}}]}`

func TestGetRawOutput(t *testing.T) {
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(rawClusterList), "", "    "); err != nil {
		t.Fatal(err)
	}
	wantYAML, err := yaml.JSONToYAML([]byte(rawClusterList))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		output string
		want   string
	}{
		{"json", indented.String() + "\n"},
		{"yaml", string(wantYAML)},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			r := run(t, rawHub(t, rawClusterList), "get", "clusters", "-o", tt.output)
			wantExit(t, r, 0)
			if diff := cmp.Diff(tt.want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetRawYAMLReadable(t *testing.T) {
	r := run(t, rawHub(t, rawClusterList), "get", "clusters", "--output=yaml")
	wantExit(t, r, 0)
	want := `apiVersion: flotilla.io/v1alpha1
items:
- apiVersion: flotilla.io/v1alpha1
  kind: Cluster
  metadata:
    name: edge-1
  spec:
    region: eu
  status:
    futureField:
      a:
      - true
      b: 1
kind: ClusterList
metadata:
  resourceVersion: "7"
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

func TestGetSingleObjectJSON(t *testing.T) {
	hub := newFixtureHub(t)
	r := run(t, hub, "get", "lease", "edge-1", "-o", "json")
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
	r := run(t, newFakeHub(t), "get", "clusters")
	wantExit(t, r, 0)
	if r.stdout != "" || r.stderr != "No clusters found.\n" {
		t.Errorf("stdout %q, stderr %q; want nothing and %q", r.stdout, r.stderr, "No clusters found.\n")
	}
}

func TestGetNotFound(t *testing.T) {
	hub := newFixtureHub(t)
	r := run(t, hub, "get", "clusters", "nope")
	wantExit(t, r, 1)
	if diff := cmp.Diff("error: clusters \"nope\" not found\n", r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GET " + clustersPath + "/nope"}, hub.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
