package bootstraptoken

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// kube returns an admin client of the shared API server and deletes, at
// test end, every token the test made.
func kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	client := hubapi.Start(t).Kube
	t.Cleanup(func() {
		// t.Context is done by the time cleanups run.
		ctx := context.Background()
		tokens, _, err := List(ctx, client)
		if err != nil {
			t.Errorf("list tokens at cleanup: %v", err)
		}
		for _, tok := range tokens {
			if _, err := Delete(ctx, client, tok.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return client
}

func TestCreateStoresAStandardTokenSecret(t *testing.T) {
	client := kube(t)
	now := time.Now()
	tok, err := Create(t.Context(), client, CreateOptions{TTL: 2 * time.Hour, Cluster: "edge-1", Description: "site 7"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.ID) != 6 || len(tok.Secret) != 16 || tok.String() != tok.ID+"."+tok.Secret {
		t.Fatalf("token %q: want kubeadm's [a-z0-9]{6}.[a-z0-9]{16}", tok)
	}
	s, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), "bootstrap-token-"+tok.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "bootstrap.kubernetes.io/token" {
		t.Errorf("type %q", s.Type)
	}
	got := map[string]string{}
	for k, v := range s.Data {
		got[k] = string(v)
	}
	want := map[string]string{
		"token-id": tok.ID, "token-secret": tok.Secret, "description": "site 7",
		"expiration":                     now.Add(2 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339),
		"usage-bootstrap-authentication": "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("secret data (-want +got):\n%s", diff)
	}
	if s.Labels[ClusterLabel] != "edge-1" {
		t.Errorf("labels %v: want %s=edge-1", s.Labels, ClusterLabel)
	}

	never, err := Create(t.Context(), client, CreateOptions{Reusable: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	tokens, bad, err := List(t.Context(), client)
	if err != nil || len(bad) > 0 {
		t.Fatalf("List: %v, %v", bad, err)
	}
	var ids []string
	for _, x := range tokens {
		ids = append(ids, x.ID)
	}
	if diff := cmp.Diff([]string{tok.ID, never.ID}, ids); diff != "" && !cmp.Equal([]string{never.ID, tok.ID}, ids) {
		t.Errorf("listed tokens (-want +got):\n%s", diff)
	}
	for _, x := range tokens {
		if x.ID == never.ID && (!x.Expires.IsZero() || x.Cluster != "" || !x.Reusable) {
			t.Errorf("reusable token made with no TTL and no cluster lists as %+v", x)
		}
		if x.ID == tok.ID && (x.Reusable || x.Replace || x.UsedBy != "") {
			t.Errorf("single-use token lists as %+v", x)
		}
	}
}

func TestCreateRefusesBadOptions(t *testing.T) {
	client := kube(t)
	for _, tt := range []struct {
		opts CreateOptions
		want string
	}{
		{CreateOptions{TTL: -time.Second}, "--ttl -1s: must not be negative"},
		{CreateOptions{TTL: time.Hour, Cluster: "Edge_1"}, `--cluster "Edge_1": not a valid cluster name`},
		{CreateOptions{TTL: time.Hour, Description: strings.Repeat("x", 1025)}, "--description: 1025 bytes, at most 1024"},
		{CreateOptions{}, "--ttl 0 (never expires) needs --reusable"},
		{CreateOptions{TTL: time.Hour, Replace: true}, "--replace needs --cluster NAME"},
		{CreateOptions{TTL: time.Hour, Cluster: "edge-1", Replace: true, Reusable: true}, "--replace and --reusable"},
	} {
		if _, err := Create(t.Context(), client, tt.opts, time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Create(%+v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
	if tokens, _, _ := List(t.Context(), client); len(tokens) > 0 {
		t.Errorf("refused options stored %d tokens", len(tokens))
	}
}

func TestDelete(t *testing.T) {
	client := kube(t)
	a, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if id, err := Delete(t.Context(), client, a.ID); err != nil || id != a.ID {
		t.Errorf("Delete by ID: %q, %v", id, err)
	}
	if id, err := Delete(t.Context(), client, b.String()); err != nil || id != b.ID {
		t.Errorf("Delete by token: %q, %v", id, err)
	}
	if _, err := Delete(t.Context(), client, a.ID); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("second Delete: %v, want not found", err)
	}
	if _, err := Delete(t.Context(), client, "NOT-A-TOKEN"); err == nil || !strings.Contains(err.Error(), "neither a token ID") {
		t.Errorf("Delete of garbage: %v", err)
	}
}

func TestAuthenticate(t *testing.T) {
	client := kube(t)
	now := time.Now()
	free, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour, Cluster: "edge-1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	reusable, err := Create(t.Context(), client, CreateOptions{Reusable: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Delete(t.Context(), client, deleted.ID); err != nil {
		t.Fatal(err)
	}
	signingOnly, err := Create(t.Context(), client, CreateOptions{TTL: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.CoreV1().Secrets(Namespace).Get(t.Context(), "bootstrap-token-"+signingOnly.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(s.Data, bootstrapapi.BootstrapTokenUsageAuthentication)
	s.Data[bootstrapapi.BootstrapTokenUsageSigningKey] = []byte("true")
	if _, err := client.CoreV1().Secrets(Namespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wrongSecret := free.ID + "." + strings.Repeat("0", 16)

	for _, tt := range []struct {
		name, token, cluster string
		at                   time.Time
		wantReason           string
	}{
		{"free token, any name", free.String(), "edge-9", now, ""},
		{"reusable token, any name", reusable.String(), "edge-9", now, ""},
		{"bound token, its name", bound.String(), "edge-1", now, ""},
		{"bound token, another name", bound.String(), "edge-2", now, ReasonOtherCluster},
		{"expired", free.String(), "edge-9", now.Add(time.Hour + time.Second), ReasonExpired},
		{"deleted", deleted.String(), "edge-9", now, ReasonUnknown},
		{"wrong secret", wrongSecret, "edge-9", now, ReasonUnknown},
		{"malformed", "abc", "edge-9", now, ReasonMalformed},
		{"not for authentication", signingOnly.String(), "edge-9", now, ReasonNotForJoining},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok, secret, err := Authenticate(t.Context(), client.CoreV1(), tt.token, tt.cluster, tt.at)
			if tt.wantReason == "" {
				if err != nil || secret == nil || tok.String() != tt.token {
					t.Fatalf("Authenticate = %v, %v, %v; want the token", tok, secret, err)
				}
				return
			}
			r, ok := Refused(err)
			if !ok || r.Reason != tt.wantReason {
				t.Fatalf("Authenticate = %v, want refusal %s", err, tt.wantReason)
			}
			if strings.Contains(r.Message, strings.Repeat("0", 16)) || (tt.token != "abc" && strings.Contains(r.Message, tt.token[7:])) {
				t.Errorf("refusal %q repeats the secret", r.Message)
			}
		})
	}
}

func TestFromSecretRefusesMalformed(t *testing.T) {
	good := Token{ID: "abcdef", Secret: "0123456789abcdef"}.secret()
	mutate := func(f func(*corev1.Secret)) *corev1.Secret {
		s := good.DeepCopy()
		f(s)
		return s
	}
	for name, s := range map[string]*corev1.Secret{
		"other type":     mutate(func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }),
		"short secret":   mutate(func(s *corev1.Secret) { s.Data["token-secret"] = []byte("abc") }),
		"name mismatch":  mutate(func(s *corev1.Secret) { s.Name = "bootstrap-token-zzzzzz" }),
		"bad expiration": mutate(func(s *corev1.Secret) { s.Data["expiration"] = []byte("tomorrow") }),
	} {
		if _, err := FromSecret(s); err == nil {
			t.Errorf("%s: FromSecret accepted it", name)
		}
	}
	if _, err := FromSecret(good); err != nil {
		t.Errorf("well-formed secret: %v", err)
	}
}

// TestSingleUseAndReusable: a single-use token is claimed by one
// certificate request (again by the same one), refused to any other and
// to new joins once claimed, and gone once consumed; a reusable token is
// neither bound, nor used up.
func TestSingleUseAndReusable(t *testing.T) {
	client := kube(t)
	ctx, secrets, now := t.Context(), client.CoreV1(), time.Now()
	once, err := Create(ctx, client, CreateOptions{TTL: time.Hour, Cluster: "edge-1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	reusable, err := Create(ctx, client, CreateOptions{TTL: time.Hour, Reusable: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused := func(what string, err error, reason string) {
		t.Helper()
		if r, ok := Refused(err); !ok || r.Reason != reason {
			t.Errorf("%s: %v, want refusal %s", what, err, reason)
		}
	}

	claimed, found, err := Claim(ctx, secrets, once.ID, "request-a")
	if err != nil || !found || claimed.UsedBy != "request-a" {
		t.Fatalf("Claim = %+v, %t, %v; want it used by request-a", claimed, found, err)
	}
	if again, _, err := Claim(ctx, secrets, once.ID, "request-a"); err != nil || again.UsedBy != "request-a" {
		t.Errorf("the same request claiming again: %+v, %v", again, err)
	}
	_, _, err = Claim(ctx, secrets, once.ID, "request-b")
	wantRefused("another request claiming it", err, ReasonUsed)
	_, _, err = Authenticate(ctx, secrets, once.String(), "edge-1", now)
	wantRefused("a join with it once claimed", err, ReasonUsed)
	for range 2 { // consuming twice is no error
		if err := Consume(ctx, secrets, claimed); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = Authenticate(ctx, secrets, once.String(), "edge-1", now)
	wantRefused("a join with it once consumed", err, ReasonUnknown)
	if _, found, err := Claim(ctx, secrets, once.ID, "request-a"); found || err != nil {
		t.Errorf("Claim of a consumed token: found %t, %v; want not found, no error", found, err)
	}

	for i, cluster := range []string{"edge-7", "edge-8"} {
		tok, s, err := Authenticate(ctx, secrets, reusable.String(), cluster, now)
		if err != nil {
			t.Fatalf("reusable token, join %d (%s): %v", i+1, cluster, err)
		}
		if err := Bind(ctx, secrets, s, cluster); err != nil {
			t.Fatal(err)
		}
		claimed, found, err := Claim(ctx, secrets, tok.ID, "request-"+cluster)
		if err != nil || !found || claimed.UsedBy != "" {
			t.Fatalf("Claim of a reusable token: %+v, %t, %v", claimed, found, err)
		}
		if err := Consume(ctx, secrets, claimed); err != nil {
			t.Fatal(err)
		}
	}
	if tokens, _, _ := List(ctx, client); len(tokens) != 1 || tokens[0].ID != reusable.ID || tokens[0].Cluster != "" {
		t.Errorf("after two joins the tokens are %+v; want the reusable one, unbound", tokens)
	}
}

func TestFromSecretUse(t *testing.T) {
	base := Token{ID: "abcdef", Secret: "0123456789abcdef"}.secret()
	for _, tt := range []struct {
		label                   string // "-": no label (a token made before tokens had uses)
		reusable, replace, fail bool
	}{
		{label: "-"},
		{label: UseOnce},
		{label: UseReusable, reusable: true},
		{label: UseReplace, replace: true},
		{label: "twice", fail: true},
	} {
		s := base.DeepCopy()
		if tt.label == "-" {
			delete(s.Labels, UseLabel)
		} else {
			s.Labels[UseLabel] = tt.label
		}
		got, err := FromSecret(s)
		if (err != nil) != tt.fail || got.Reusable != tt.reusable || got.Replace != tt.replace {
			t.Errorf("label %q: %+v, %v", tt.label, got, err)
		}
	}
}
