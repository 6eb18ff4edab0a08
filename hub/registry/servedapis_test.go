package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/protocol"
)

func TestValidAPIs(t *testing.T) {
	res := func(name, kind string) protocol.APIResource { return protocol.APIResource{Name: name, Kind: kind} }
	long := strings.Repeat("x", 64)
	tests := []struct {
		name        string
		in, want    []protocol.APIEnablement
		wantDropped int
	}{
		{name: "what Kubernetes serves",
			in: []protocol.APIEnablement{{GroupVersion: "v1", Resources: []protocol.APIResource{res("pods", "Pod"), res("componentstatuses", "ComponentStatus")}},
				{GroupVersion: "apiextensions.k8s.io/v1", Resources: []protocol.APIResource{res("customresourcedefinitions", "CustomResourceDefinition")}},
				{GroupVersion: "policy.karmada.io/v1alpha1", Resources: []protocol.APIResource{res("propagationpolicies", "PropagationPolicy")}}},
		},
		{name: "a resource name longer than a label",
			in:   []protocol.APIEnablement{{GroupVersion: "apps/v1", Resources: []protocol.APIResource{res("deployments", "Deployment"), res(long, "Widget")}}},
			want: []protocol.APIEnablement{{GroupVersion: "apps/v1", Resources: []protocol.APIResource{res("deployments", "Deployment")}}}, wantDropped: 1},
		{name: "a kind that is no name",
			in:   []protocol.APIEnablement{{GroupVersion: "apps/v1", Resources: []protocol.APIResource{res("widgets", "Wid get"), res("gadgets", long)}}},
			want: []protocol.APIEnablement{{GroupVersion: "apps/v1"}}, wantDropped: 2},
		{name: "a subresource", in: []protocol.APIEnablement{{GroupVersion: "v1", Resources: []protocol.APIResource{res("pods/log", "Pod")}}},
			want: []protocol.APIEnablement{{GroupVersion: "v1"}}, wantDropped: 1},
		{name: "bad group and version",
			in:   []protocol.APIEnablement{{GroupVersion: "Example.COM/v1"}, {GroupVersion: "example.com/1.0"}, {GroupVersion: strings.Repeat("g", 254) + "/v1"}, {GroupVersion: "example.com/v1"}},
			want: []protocol.APIEnablement{{GroupVersion: "example.com/v1"}}, wantDropped: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			got, dropped := validAPIs(&protocol.ServedAPIs{Items: tc.in})
			if diff := cmp.Diff(want, got.Items); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if len(dropped) != tc.wantDropped {
				t.Errorf("dropped %q, want %d entries", dropped, tc.wantDropped)
			}
		})
	}
}

// TestRegistryRefusesOversizedAPIs: a list larger than a Cluster stores is
// refused whole, the stored one stays, and an event says why.
func TestRegistryRefusesOversizedAPIs(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	f := newRegistryFixture(t, clk, t0.Add(-time.Hour))
	f.connect("edge-1")
	report := func(apis *protocol.ServedAPIs) {
		t.Helper()
		if err := f.reg.Status("edge-1", &protocol.ClusterStatus{ObservedAt: clk.Now(), APIServerHealthy: true, ServedAPIs: apis}); err != nil {
			t.Fatal(err)
		}
	}
	small := &protocol.ServedAPIs{Items: []protocol.APIEnablement{{GroupVersion: "apps/v1", Resources: []protocol.APIResource{{Name: "deployments", Kind: "Deployment"}}}}}
	report(small)
	huge := &protocol.ServedAPIs{}
	for g := range 2000 {
		gv := protocol.APIEnablement{GroupVersion: fmt.Sprintf("g%d.example.com/v1", g)}
		for k := range 8 {
			gv.Resources = append(gv.Resources, protocol.APIResource{Name: fmt.Sprintf("widgets%d", k), Kind: fmt.Sprintf("Widget%d", k)})
		}
		huge.Items = append(huge.Items, gv)
	}
	recordedBefore := f.reg.Counters().EventsRecorded
	report(huge)
	if apis := f.cluster("edge-1").Status.APIEnablements; len(apis) != 1 || apis[0].GroupVersion != "apps/v1" {
		t.Errorf("stored APIs %d group versions, want the small list kept", len(apis))
	}
	if n := f.reg.Counters().APIsRefused; n != 1 {
		t.Errorf("%d lists refused, want 1", n)
	}
	if n := f.reg.Counters().EventsRecorded - recordedBefore; n != 1 {
		t.Errorf("%d events recorded for the refusal, want 1", n)
	}
}
