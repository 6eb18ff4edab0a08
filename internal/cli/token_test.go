package cli

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/internal/pki"
)

var tokenPattern = regexp.MustCompile(`[a-z0-9]{6}\.[a-z0-9]{16}`)

// publishInfo plays the hub's start: it publishes where agents dial and
// the CA's pin. The tokens and the information go at test end.
func (h *testHub) publishInfo(t *testing.T) bootstraptoken.Info {
	t.Helper()
	ca, err := pki.NewCA("token-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	info := h.info(t, ca.Cert)
	if err := bootstraptoken.PublishInfo(t.Context(), h.Kube, info); err != nil {
		t.Fatal(err)
	}
	return info
}

func (*testHub) info(t *testing.T, ca *x509.Certificate) bootstraptoken.Info {
	t.Helper()
	info, err := bootstraptoken.NewInfo("hub.example.com:7443", ca)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// dropTokens deletes every token and the hub's join information at test
// end.
func (h *testHub) dropTokens(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		tokens, _, err := bootstraptoken.List(ctx, h.Kube)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, tok := range tokens {
			if _, err := bootstraptoken.Delete(ctx, h.Kube, tok.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		_ = h.Kube.CoreV1().ConfigMaps(bootstraptoken.InfoNamespace).Delete(ctx, bootstraptoken.InfoName, metav1.DeleteOptions{})
	})
}

func TestTokenCreatePrintsTheJoinCommand(t *testing.T) {
	h := newHub(t)
	h.dropTokens(t)
	info := h.publishInfo(t)

	r := h.run(t, "token", "create", "--cluster", "edge-1", "--ttl", "2h", "--description", "store 7")
	wantExit(t, r, 0)
	tok := tokenPattern.FindString(r.stdout)
	if tok == "" {
		t.Fatalf("no token in %q", r.stdout)
	}
	want := "token " + tok + " created: expires 2026-05-01T14:00:00Z, joins only cluster edge-1, once\n\n" +
		"Join an edge cluster: with kubectl and helm pointed at it, from a checkout of Flotilla, run\n\n" +
		"    helm install flotilla-agent charts/flotilla-agent \\\n" +
		"    --namespace flotilla-system --create-namespace \\\n" +
		"    --set cluster.name=edge-1 \\\n" +
		"    --set hub.address=hub.example.com:7443 \\\n" +
		"    --set hub.caCertHash=" + info.CAPin + " \\\n" +
		"    --set bootstrapToken=" + tok + "\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if _, _, err := bootstraptoken.Authenticate(t.Context(), h.Kube.CoreV1(), tok, "edge-1", testNow); err != nil {
		t.Errorf("the printed token does not join edge-1: %v", err)
	}

	r = h.run(t, "token", "create", "--token-only", "--reusable", "--ttl", "0", "--hub-address", "10.0.0.1:9443")
	wantExit(t, r, 0)
	if !tokenPattern.MatchString(r.stdout) || len(r.stdout) != 24 {
		t.Errorf("--token-only printed %q", r.stdout)
	}

	r = h.run(t, "token", "list")
	wantExit(t, r, 0)
	id := tok[:6]
	got := squeeze(r.stdout)
	for _, want := range []string{
		"ID TTL EXPIRES USE CLUSTER AGE DESCRIPTION",
		id + " 2h 2026-05-01T14:00:00Z once edge-1 0s store 7",
		" <forever> <never> reusable - 0s -",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("token list:\n%s\nwant a line with %q", got, want)
		}
	}
	if strings.Contains(r.stdout, tok[7:]) {
		t.Errorf("token list shows a secret:\n%s", r.stdout)
	}

	r = h.run(t, "token", "delete", id, "zzzzzz")
	wantExit(t, r, 1)
	if r.stdout != "bootstrap token "+id+" deleted\n" ||
		r.stderr != "error: bootstrap token zzzzzz not found\nerror: 1 of 2 tokens not deleted\n" {
		t.Errorf("delete: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	if _, _, err := bootstraptoken.Authenticate(t.Context(), h.Kube.CoreV1(), tok, "edge-1", testNow); err == nil {
		t.Error("a deleted token still joins")
	}
}

// TestTokenMetadata: what a token registers its cluster with is said by
// create and shown by list -o wide and -o json.
func TestTokenMetadata(t *testing.T) {
	h := newHub(t)
	h.dropTokens(t)
	h.publishInfo(t)

	r := h.run(t, "token", "create", "--region", "r1", "--zone", "z1", "--label", "tier=edge", "--label", "example.com/site=7")
	wantExit(t, r, 0)
	tok := tokenPattern.FindString(r.stdout)
	if want := "created: expires 2026-05-01T13:00:00Z, joins once, the first new cluster that uses it\n" +
		"the hub registers the cluster with region r1, zone z1, labels example.com/site=7,tier=edge\n\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("token create printed:\n%s\nwant %q", r.stdout, want)
	}

	r = h.run(t, "token", "list", "-o", "wide")
	wantExit(t, r, 0)
	got := squeeze(r.stdout)
	for _, want := range []string{
		"ID TTL EXPIRES USE CLUSTER AGE DESCRIPTION PROVIDER REGION ZONE LABELS",
		tok[:6] + " 1h 2026-05-01T13:00:00Z once - 0s - - r1 z1 example.com/site=7,tier=edge",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("token list -o wide:\n%s\nwant a line with %q", got, want)
		}
	}

	r = h.run(t, "token", "list", "-o", "json")
	wantExit(t, r, 0)
	var listed []tokenView
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 {
		t.Fatalf("token list -o json: %v\n%s", err, r.stdout)
	}
	want := bootstraptoken.ClusterMetadata{Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge", "example.com/site": "7"}}
	if listed[0].ID != tok[:6] || listed[0].Registers == nil || !cmp.Equal(want, *listed[0].Registers) {
		t.Errorf("token list -o json: %+v, want %s registering %+v", listed[0], tok[:6], want)
	}
	if strings.Contains(r.stdout, tok[7:]) {
		t.Errorf("token list -o json shows the secret:\n%s", r.stdout)
	}
}

func TestTokenCreateNeedsTheHubsJoinInformation(t *testing.T) {
	h := newHub(t)
	h.dropTokens(t)
	r := h.run(t, "token", "create")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "the hub has not published its join information") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if tokens, _, _ := bootstraptoken.List(t.Context(), h.Kube); len(tokens) != 0 {
		t.Errorf("%d tokens stored", len(tokens))
	}
}

func TestTokenUsageErrors(t *testing.T) {
	h := newHub(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "expected create, list or delete"},
		{[]string{"frob"}, `unknown token command "frob"`},
		{[]string{"create", "x"}, `token create takes no arguments, got ["x"]`},
		{[]string{"create", "--ttl", "-1s"}, "--ttl -1s: must not be negative"},
		{[]string{"create", "--cluster", "Bad_Name"}, `--cluster "Bad_Name": not a valid cluster name`},
		{[]string{"create", "--ttl", "0"}, "--ttl 0 (never expires) needs --reusable"},
		{[]string{"create", "--replace"}, "--replace needs --cluster NAME"},
		{[]string{"create", "--cluster", "edge-1", "--replace", "--reusable"}, "--replace and --reusable"},
		{[]string{"create", "--region", "eu west"}, `--region "eu west": not a label value`},
		{[]string{"create", "--zone", strings.Repeat("z", 64)}, `--zone "` + strings.Repeat("z", 64) + `": not a label value`},
		{[]string{"create", "--provider", "-aws"}, `--provider "-aws": not a label value`},
		{[]string{"create", "--label", "tier"}, `--label "tier": want KEY=VALUE`},
		{[]string{"create", "--label", "tier=edge", "--label", "tier=core"}, `--label "tier=core": key tier given twice`},
		{[]string{"create", "--label", "bad key=x"}, `--label bad key=x: "bad key" is not a label key`},
		{[]string{"create", "--label", "agent.flotilla.io/site=a"}, "--label agent.flotilla.io/site=a: labels under agent.flotilla.io/ are the ones the cluster's agent sets"},
		{[]string{"list", "x"}, `token list takes no arguments`},
		{[]string{"list", "-o", "xml"}, `invalid --output "xml"`},
		{[]string{"delete"}, "token delete needs the ID or the whole token"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := h.run(t, append([]string{"token"}, tt.args...)...)
			wantExit(t, r, 2)
			if !strings.HasPrefix(r.stderr, "error: "+tt.want) {
				t.Errorf("stderr = %q, want it to start with %q", r.stderr, "error: "+tt.want)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q", sent)
			}
		})
	}
}
