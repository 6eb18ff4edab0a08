package bootstraptoken

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClusterMetadataValidate(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	for _, tt := range []struct {
		name string
		m    ClusterMetadata
		want string // "" accepts
	}{
		{"nothing", ClusterMetadata{}, ""},
		{"all of it", ClusterMetadata{Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Labels: map[string]string{"tier": "edge", "example.com/site": "7", "empty": ""}}, ""},
		{"provider with a space", ClusterMetadata{Provider: "a ws"}, `--provider "a ws": not a label value`},
		{"region too long", ClusterMetadata{Region: strings.Repeat("r", 64)}, "--region " + `"` + strings.Repeat("r", 64) + `": not a label value: must be no more than 63`},
		{"zone with a slash", ClusterMetadata{Zone: "eu/1a"}, `--zone "eu/1a": not a label value`},
		{"bad label key", ClusterMetadata{Labels: map[string]string{"-tier": "edge"}}, `--label -tier=edge: "-tier" is not a label key`},
		{"bad label value", ClusterMetadata{Labels: map[string]string{"tier": "edge site"}}, `--label tier=edge site: "edge site" is not a label value`},
		{"the agent's prefix", ClusterMetadata{Labels: map[string]string{"agent.flotilla.io/site": "a"}}, "--label agent.flotilla.io/site=a: labels under agent.flotilla.io/ are the ones the cluster's agent sets"},
		{"too many labels", ClusterMetadata{Labels: many}, "--label: 65 labels, at most 64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseLabel(t *testing.T) {
	labels := map[string]string{}
	for _, tt := range []struct{ kv, want string }{
		{"tier=edge", ""},
		{"empty=", ""},
		{"a=b=c", ""},
		{"tier=core", `--label "tier=core": key tier given twice`},
		{"tier", `--label "tier": want KEY=VALUE`},
	} {
		err := ParseLabel(labels, tt.kv)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || err.Error() != tt.want) {
			t.Errorf("ParseLabel(%q) = %v, want %q", tt.kv, err, tt.want)
		}
	}
	if diff := cmp.Diff(map[string]string{"tier": "edge", "empty": "", "a": "b=c"}, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestMetadataIsStoredWithTheToken: a token keeps its metadata in its
// Secret, List reads it back, and a Secret whose metadata was edited into
// something invalid is refused like any malformed token.
func TestMetadataIsStoredWithTheToken(t *testing.T) {
	client := kube(t)
	want := ClusterMetadata{Provider: "aws", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}}
	tok, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour, Metadata: want}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tokens, bad, err := List(t.Context(), client)
	if err != nil || len(bad) > 0 || len(tokens) != 1 {
		t.Fatalf("List = %+v, %v, %v", tokens, bad, err)
	}
	if diff := cmp.Diff(want, tokens[0].Metadata); diff != "" {
		t.Errorf("listed metadata (-want +got):\n%s", diff)
	}
	if got := want.String(); got != "provider aws, region r1, zone z1, labels tier=edge" {
		t.Errorf("String() = %q", got)
	}

	s, err := client.CoreV1().Secrets(Namespace).Get(t.Context(), "bootstrap-token-"+tok.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"not JSON":          "region=evil",
		"an invalid zone":   `{"zone":"z 9"}`,
		"the agent's label": `{"labels":{"agent.flotilla.io/site":"a"}}`,
	} {
		edited := s.DeepCopy()
		edited.Data[MetadataKey] = []byte(data)
		if _, err := FromSecret(edited); err == nil || !strings.Contains(err.Error(), MetadataKey) {
			t.Errorf("%s: FromSecret = %v, want it refused naming %s", name, err, MetadataKey)
		}
	}
	if _, ok := (Token{ID: "abcdef", Secret: "0123456789abcdef"}).secret().Data[MetadataKey]; ok {
		t.Errorf("a token without metadata stores %s", MetadataKey)
	}
}
