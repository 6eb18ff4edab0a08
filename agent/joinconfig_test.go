package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMetadataTheHubIgnores: the agent warns of every registration flag
// the hub does not take from it, and not of its labels under
// agent.flotilla.io/.
func TestMetadataTheHubIgnores(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"none given", Config{}, nil},
		{"only the agent's own labels", Config{Labels: map[string]string{"agent.flotilla.io/site": "a"}}, nil},
		{"all of them", Config{Provider: "aws", Region: "evil", Zone: "z9", Labels: map[string]string{"secrets": "yes", "agent.flotilla.io/site": "a"}},
			[]string{"--cluster-provider=aws", "--cluster-region=evil", "--cluster-zone=z9", "--cluster-labels secrets=yes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.cfg.metadataTheHubIgnores()); diff != "" {
				t.Errorf("ignored (-want +got):\n%s", diff)
			}
		})
	}
}
