package join

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestRegistrationOf: the token's metadata is what the Cluster gets; of
// the agent's request only labels under agent.flotilla.io/ are taken, at
// most protocol.MaxAgentLabels, and the rest is listed as ignored.
func TestRegistrationOf(t *testing.T) {
	token := bootstraptoken.ClusterMetadata{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}}
	manyAgentLabels := map[string]string{}
	for i := range protocol.MaxAgentLabels + 2 {
		manyAgentLabels[fmt.Sprintf("agent.flotilla.io/l%02d", i)] = "x"
	}
	manyOthers := map[string]string{}
	for i := range 20 {
		manyOthers[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", 63)
	}
	for _, tt := range []struct {
		name  string
		token bootstraptoken.ClusterMetadata
		join  protocol.JoinRequest
		want  Registration
	}{
		{name: "nothing asked, nothing set", want: Registration{}},
		{name: "the token's metadata, an agent that asks nothing", token: token,
			want: Registration{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}}},
		{name: "a label-choosing join", token: token,
			join: protocol.JoinRequest{Provider: "evil", Region: "evil", Zone: "z9", Labels: map[string]string{"secrets": "yes", "tier": "core", "agent.flotilla.io/site": "a"}},
			want: Registration{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge", "agent.flotilla.io/site": "a"},
				Ignored: []string{`provider "evil"`, `region "evil"`, `zone "z9"`, "label secrets=yes", "label tier=core"}}},
		{name: "an old agent that repeats what the token says is not warned", token: token,
			join: protocol.JoinRequest{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}},
			want: Registration{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}}},
		{name: "a token without metadata registers none of the agent's", join: protocol.JoinRequest{Zone: "z9", Labels: map[string]string{"zone": "z9"}},
			want: Registration{Ignored: []string{`zone "z9"`, "label zone=z9"}}},
		{name: "an invalid agent label", join: protocol.JoinRequest{Labels: map[string]string{"agent.flotilla.io/site": "a b"}},
			want: Registration{Ignored: []string{"label agent.flotilla.io/site=a b (not a valid label)"}}},
		{name: "at most MaxAgentLabels agent labels", join: protocol.JoinRequest{Labels: manyAgentLabels},
			want: Registration{Labels: firstN(manyAgentLabels, protocol.MaxAgentLabels), Ignored: []string{
				"label agent.flotilla.io/l16=x (more than 16 agent labels)", "label agent.flotilla.io/l17=x (more than 16 agent labels)"}}},
		{name: "the list of what was ignored is bounded", join: protocol.JoinRequest{Region: strings.Repeat("r", 1024), Labels: manyOthers},
			want: Registration{Ignored: append(append([]string{`region "` + strings.Repeat("r", maxIgnoredItem-len(`region "`)) + "..."},
				labelItems(manyOthers, maxIgnored-1)...), "and 13 more")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := registrationOf(tt.token, &tt.join)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("registration (-want +got):\n%s", diff)
			}
		})
	}
}

func firstN(labels map[string]string, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		k := fmt.Sprintf("agent.flotilla.io/l%02d", i)
		out[k] = labels[k]
	}
	return out
}

func labelItems(labels map[string]string, n int) []string {
	var out []string
	for i := range n {
		k := fmt.Sprintf("k%02d", i)
		out = append(out, "label "+k+"="+labels[k])
	}
	return out
}

// TestWithRegistration: a join of a Cluster that exists sets what its
// Registration sets and removes nothing an operator set.
func TestWithRegistration(t *testing.T) {
	existing := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"tier": "edge", "secrets": "yes"}},
		Spec:       v1alpha1.ClusterSpec{Provider: "aws", Region: "r1", Zone: "z1"},
	}
	for _, tt := range []struct {
		name       string
		reg        Registration
		wantLabels map[string]string
		wantSpec   v1alpha1.ClusterSpec
	}{
		{"a replace token that sets nothing keeps it all", Registration{}, existing.Labels, existing.Spec},
		{"an agent label is added", Registration{Labels: map[string]string{"agent.flotilla.io/site": "b"}},
			map[string]string{"tier": "edge", "secrets": "yes", "agent.flotilla.io/site": "b"}, existing.Spec},
		{"the token's zone and label change those", Registration{Zone: "z2", Labels: map[string]string{"tier": "core"}},
			map[string]string{"tier": "core", "secrets": "yes"}, v1alpha1.ClusterSpec{Provider: "aws", Region: "r1", Zone: "z2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := withRegistration(existing, tt.reg)
			if diff := cmp.Diff(tt.wantLabels, got.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSpec, got.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
	if existing.Labels["agent.flotilla.io/site"] != "" || existing.Spec.Zone != "z1" {
		t.Errorf("withRegistration changed its argument: %+v", existing)
	}
	if got := withRegistration(&v1alpha1.Cluster{}, Registration{Labels: map[string]string{"a": "b"}}); got.Labels["a"] != "b" {
		t.Errorf("a Cluster without labels gets %v", got.Labels)
	}
}
