package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRequestCounts(t *testing.T) {
	for _, tc := range []struct {
		name, metrics string
		want          map[string]float64
		wantErr       bool
	}{
		{
			name: "sums hosts by verb, ignores other series",
			metrics: `# HELP rest_client_request_duration_seconds Latency
rest_client_request_duration_seconds_bucket{host="127.0.0.1:1",verb="GET",le="0.001"} 3
rest_client_request_duration_seconds_count{host="127.0.0.1:1",verb="GET"} 12
rest_client_request_duration_seconds_count{host="127.0.0.1:2",verb="GET"} 3
rest_client_request_duration_seconds_count{host="127.0.0.1:1",verb="PATCH"} 2
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 15
`,
			want: map[string]float64{"GET": 15, "PATCH": 2},
		},
		{name: "no requests yet", metrics: "go_goroutines 40\n", want: map[string]float64{}},
		{name: "a broken line", metrics: `rest_client_request_duration_seconds_count{verb="GET"}12` + "\n", wantErr: true},
		{name: "a broken value", metrics: `rest_client_request_duration_seconds_count{verb="GET"} x` + "\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRequestCounts(strings.NewReader(tc.metrics))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if !tc.wantErr {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("counts (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestAgentBinValue(t *testing.T) {
	got := [][2]string{
		{agentLabel("old=/tmp/a"), agentPath("old=/tmp/a")},
		{agentLabel("bin/flotilla-agent"), agentPath("bin/flotilla-agent")},
	}
	want := [][2]string{{"old", "/tmp/a"}, {"bin/flotilla-agent", "bin/flotilla-agent"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("label, path (-want +got):\n%s", diff)
	}
}
