package binding

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

func TestStatePaths(t *testing.T) {
	rules := func(paths ...string) *v1alpha1.StatePreservation {
		sp := &v1alpha1.StatePreservation{}
		for i, p := range paths {
			sp.Rules = append(sp.Rules, v1alpha1.StatePreservationRule{AliasLabelName: string(rune('a' + i)), JSONPath: p})
		}
		return sp
	}
	tests := []struct {
		name     string
		failover *v1alpha1.FailoverBehavior
		want     []string
	}{
		{"no failover", nil, nil},
		{"failover without state", &v1alpha1.FailoverBehavior{Cluster: &v1alpha1.ClusterFailoverBehavior{PurgeMode: "Directly"}}, nil},
		{"cluster rules", &v1alpha1.FailoverBehavior{Cluster: &v1alpha1.ClusterFailoverBehavior{StatePreservation: rules("{.jobStatus.jobId}", "{.b}")}},
			[]string{"{.b}", "{.jobStatus.jobId}"}},
		{"both, sorted and deduplicated", &v1alpha1.FailoverBehavior{
			Application: &v1alpha1.ApplicationFailoverBehavior{StatePreservation: rules("{.z}", "{.a}")},
			Cluster:     &v1alpha1.ClusterFailoverBehavior{StatePreservation: rules("{.a}", "{.m}", "")}},
			[]string{"{.a}", "{.m}", "{.z}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statePaths(&v1alpha1.ResourceBindingSpec{Failover: tt.failover})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("statePaths (-want +got):\n%s", diff)
			}
		})
	}
}

// Every template validation lets through fits in what the protocol
// carries: an upsert the agent refuses would end its session.
func TestStatePathsFitTheProtocol(t *testing.T) {
	if n := 2 * v1alpha1.MaxStatePreservationRules; n > protocol.MaxStatePaths {
		t.Errorf("a binding may have %d templates, the protocol carries %d", n, protocol.MaxStatePaths)
	}
	if v1alpha1.MaxStateJSONPathLength > protocol.MaxStatePathBytes {
		t.Errorf("a template may be %d bytes long, the protocol carries %d", v1alpha1.MaxStateJSONPathLength, protocol.MaxStatePathBytes)
	}
}
