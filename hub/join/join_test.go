package join

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/hubapi"
	"github.com/flotilla-io/flotilla/transport"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// fixture is a running join controller on the shared API server, with
// CAs of its own, whose clients authenticate as testHubUser; everything a
// test makes is deleted at its end.
type fixture struct {
	t       *testing.T
	env     *hubapi.Env
	c       *Controller
	ca      *pki.CA // the hub CA
	agentCA *pki.CA
	events  *controllertest.Recorder
}

// testHubUser is the hub's user in the tests (the hub's is flotilla:hub).
const testHubUser = "join-test:hub"

func newFixture(t *testing.T, approval string, wait time.Duration, change ...func(*Config)) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t) // Clusters
	hubCA, err := pki.NewCA("join-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	agentCA, err := pki.NewCA("join-test-agents", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clients, err := kube.NewClients(env.AsUser(testHubUser, "system:masters"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, env: env, ca: hubCA, agentCA: agentCA, events: &controllertest.Recorder{}}
	cfg := Config{CA: hubCA, AgentCA: agentCA, HubUser: testHubUser, CertTTL: 24 * time.Hour, Approval: approval, Wait: wait, Recorder: f.events}
	for _, f := range change {
		f(&cfg)
	}
	f.c = New(clients, cfg, clock.RealClock{}, controllertest.Logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.cleanup()
	})
	return f
}

// cleanup deletes the tests' tokens and certificate requests.
func (f *fixture) cleanup() {
	ctx := context.Background()
	kube := f.env.Kube
	if tokens, _, err := bootstraptoken.List(ctx, kube); err == nil {
		for _, t := range tokens {
			_, _ = bootstraptoken.Delete(ctx, kube, t.ID)
		}
	}
	_ = kube.CertificatesV1().CertificateSigningRequests().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// token makes a token; one without a TTL lasts an hour.
func (f *fixture) token(opts bootstraptoken.CreateOptions) bootstraptoken.Token {
	f.t.Helper()
	if opts.TTL == 0 && !opts.Reusable {
		opts.TTL = time.Hour
	}
	tok, err := bootstraptoken.Create(f.t.Context(), f.env.Kube, opts, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

// request is a join of cluster with token and a fresh key's CSR for
// subject (default cluster:<cluster>).
func request(t *testing.T, cluster, token string, subject *pkix.Name) (*protocol.JoinRequest, *x509.CertificateRequest) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if subject == nil {
		subject = &pkix.Name{CommonName: protocol.ClusterCommonName(cluster)}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: *subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return &protocol.JoinRequest{ProtocolVersion: protocol.Version, ClusterName: cluster, BootstrapToken: token,
		CSR: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), AgentVersion: "test", AcceptsAgentCA: true}, parsed
}

// issued checks answer is a certificate for cluster signed by f's agent
// CA, not its hub CA, with the hub CA as the answer's CA, and returns it.
func (f *fixture) issued(answer protocol.Message, cluster string) *x509.Certificate {
	f.t.Helper()
	resp, ok := answer.(*protocol.JoinResponse)
	if !ok || resp.Pending {
		f.t.Fatalf("answer %#v, want a certificate", answer)
	}
	block, _ := pem.Decode(resp.Certificate)
	if block == nil {
		f.t.Fatalf("certificate %q is not PEM", resp.Certificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(f.agentCA), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		f.t.Errorf("certificate does not verify for client auth with the agent CA: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(f.ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		f.t.Error("the agent certificate verifies with the hub CA: it would authenticate to the hub's API")
	}
	if cert.Subject.CommonName != protocol.ClusterCommonName(cluster) || len(cert.Subject.Organization) > 0 {
		f.t.Errorf("certificate subject %v, want CN=cluster:%s alone", cert.Subject, cluster)
	}
	if string(resp.CACertificate) != string(f.ca.CertPEM()) {
		f.t.Error("the answer's CA is not the hub's")
	}
	return cert
}

// TestJoinOverQUICIssuesAndRegisters: a join over QUIC gets its
// certificate and registers the Cluster with the token's metadata and the
// agent's labels under agent.flotilla.io/, and nothing else the agent
// asked for (request asks for region eu-1, zone eu-1a, site=store-7).
func TestJoinOverQUICIssuesAndRegisters(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second)
	tok := f.token(bootstraptoken.CreateOptions{TTL: time.Hour,
		Metadata: bootstraptoken.ClusterMetadata{Provider: "kwok", Region: "r1", Zone: "z1", Labels: map[string]string{"tier": "edge"}}})

	// The hub side: the real TLS settings and serving certificate.
	serving, err := ca.ServingCertificate(f.ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	ln, err := quic.ListenAddr("127.0.0.1:0", protocol.ServerTLSConfig(serving, ca.Pool(f.ca)), protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if conn, err := ln.Accept(t.Context()); err == nil {
			f.c.Serve(t.Context(), transport.FromQUIC(conn))
		}
	}()

	req, _ := request(t, "edge-1", tok.String(), nil)
	req.Provider, req.Region, req.Zone = "kwok", "eu-1", "eu-1a"
	req.Labels = map[string]string{"site": "store-7", protocol.AgentLabelPrefix + "site": "a"}
	conn, err := quic.DialAddr(t.Context(), ln.Addr().String(), protocol.JoinTLSConfig(pki.Pin(f.ca.Cert)), protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	str, err := conn.OpenStreamSync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteStreamKind(str, protocol.StreamJoin); err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteMessage(str, req); err != nil {
		t.Fatal(err)
	}
	answer, err := protocol.NewReader(str, protocol.MaxJoinFrame).ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	cert := f.issued(answer, "edge-1")

	cluster, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the join registered no Cluster: %v", err)
	}
	if got := cluster.Annotations[v1alpha1.AnnotationAgentCertificateSerial]; got != cert.SerialNumber.Text(16) {
		t.Errorf("recorded serial %q, the certificate's is %s", got, cert.SerialNumber.Text(16))
	}
	wantSpec := v1alpha1.ClusterSpec{Provider: "kwok", Region: "r1", Zone: "z1"}
	if diff := cmp.Diff(wantSpec, cluster.Spec); diff != "" {
		t.Errorf("registered spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"tier": "edge", "agent.flotilla.io/site": "a"}, cluster.Labels); diff != "" {
		t.Errorf("registered labels (-want +got):\n%s", diff)
	}
	wantEvent := `Warning AgentMetadataIgnored Cluster edge-1: the agent's join (token ` + tok.ID + `, certificate request ` + requestName("edge-1", mustParse(t, req.CSR)) +
		`) asked for region "eu-1", zone "eu-1a", label site=store-7: ignored`
	if events := f.events.List(); len(events) != 1 || !strings.HasPrefix(events[0], wantEvent) {
		t.Errorf("events %q, want one starting %q", events, wantEvent)
	}
	if n := f.c.SignerCounts().MetadataIgnored; n != 1 {
		t.Errorf("SignerCounts().MetadataIgnored = %d, want 1", n)
	}
	// The token was used up: it joins nothing else. It is deleted just
	// after the answer.
	if !f.tokenGone(tok.ID) {
		t.Fatal("the single-use token is still there after its join")
	}
	again, _ := request(t, "edge-2", tok.String(), nil)
	refusal, err := f.c.join(t.Context(), again)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := refusal.(*protocol.Error); !ok || e.Code != protocol.CodeTokenRefused || !strings.Contains(e.Message, "does not exist") {
		t.Errorf("the same token for edge-2: %#v, want TokenRefused, the token gone", refusal)
	}
}

func mustParse(t *testing.T, csrPEM []byte) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestJoinRefusals(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second)
	good := f.token(bootstraptoken.CreateOptions{})
	bound := f.token(bootstraptoken.CreateOptions{Cluster: "edge-1"})
	expired := f.token(bootstraptoken.CreateOptions{})
	s, err := f.env.Kube.CoreV1().Secrets(bootstraptoken.Namespace).Get(t.Context(), "bootstrap-token-"+expired.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["expiration"] = []byte(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	if _, err := f.env.Kube.CoreV1().Secrets(bootstraptoken.Namespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := f.token(bootstraptoken.CreateOptions{})
	if _, err := bootstraptoken.Delete(t.Context(), f.env.Kube, deleted.ID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, cluster, token string
		subject              *pkix.Name
		wantCode, wantText   string
	}{
		{"expired token", "edge-9", expired.String(), nil, protocol.CodeTokenRefused, "expired"},
		{"deleted token", "edge-9", deleted.String(), nil, protocol.CodeTokenRefused, "does not exist"},
		{"malformed token", "edge-9", "abc", nil, protocol.CodeTokenRefused, "not of the form"},
		{"token bound to another cluster", "edge-2", bound.String(), nil, protocol.CodeTokenRefused, `joins only cluster "edge-1"`},
		{"a request for another cluster", "edge-9", good.String(), &pkix.Name{CommonName: "cluster:edge-8"}, protocol.CodeCSRRefused, `common name "cluster:edge-8"`},
		{"a request for a group", "edge-9", good.String(), &pkix.Name{CommonName: "cluster:edge-9", Organization: []string{"system:masters"}}, protocol.CodeCSRRefused, "more than the common name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := request(t, tt.cluster, tt.token, tt.subject)
			answer, err := f.c.join(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := answer.(*protocol.Error)
			if !ok || e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("answer %#v, want %s with %q", answer, tt.wantCode, tt.wantText)
			}
		})
	}
	// Nothing was registered, no request made, the good token not bound.
	if list, err := f.env.Kube.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
		t.Errorf("certificate requests after refusals: %v, %v", list, err)
	}
	if _, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), "edge-9", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster edge-9 after refusals: %v", err)
	}
	if tokens, _, _ := bootstraptoken.List(t.Context(), f.env.Kube); !unbound(tokens, good.ID) {
		t.Error("a refused join bound the token")
	}
}

func unbound(tokens []bootstraptoken.Token, id string) bool {
	for _, t := range tokens {
		if t.ID == id {
			return t.Cluster == ""
		}
	}
	return false
}

func TestJoinWithManualApproval(t *testing.T) {
	f := newFixture(t, ApprovalManual, 500*time.Millisecond)
	tok := f.token(bootstraptoken.CreateOptions{})
	req, x509req := request(t, "edge-3", tok.String(), nil)
	answer, err := f.c.join(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	name := requestName("edge-3", x509req)
	resp, ok := answer.(*protocol.JoinResponse)
	if !ok || !resp.Pending || !strings.Contains(resp.Message, "kubectl certificate approve "+name) {
		t.Fatalf("answer %#v, want Pending with how to approve %s", answer, name)
	}
	if _, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(t.Context(), "edge-3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("cluster registered before approval: %v", err)
	}
	// The operator approves (as kubectl certificate approve does).
	csrs := f.env.Kube.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove"})
	if _, err := csrs.UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The agent joins again with the same request and gets its certificate.
	f.c.cfg.Wait = 20 * time.Second
	answer, err = f.c.join(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.issued(answer, "edge-3")
}

func TestJoinDeniedRequest(t *testing.T) {
	f := newFixture(t, ApprovalManual, 10*time.Second)
	tok := f.token(bootstraptoken.CreateOptions{})
	req, x509req := request(t, "edge-4", tok.String(), nil)
	name := requestName("edge-4", x509req)
	csrs := f.env.Kube.CertificatesV1().CertificateSigningRequests()
	done := make(chan protocol.Message, 1)
	go func() {
		answer, err := f.c.join(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		done <- answer
	}()
	// Deny as soon as the request exists (kubectl certificate deny).
	var csr *certificatesv1.CertificateSigningRequest
	for csr == nil {
		select {
		case <-f.c.changeOf(name):
			csr, _ = f.c.lister.Get(name)
		case <-time.After(10 * time.Second):
			t.Fatal("no certificate request appeared")
		}
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "KubectlDeny", Message: "not ours"})
	if _, err := csrs.UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	answer := <-done
	if e, ok := answer.(*protocol.Error); !ok || e.Code != protocol.CodeCSRDenied || !strings.Contains(e.Message, "not ours") {
		t.Errorf("answer %#v, want CSRDenied with the operator's message", answer)
	}
}

// TestAnsweredRequestsAreCollected: a signed request is deleted once its
// retention has passed (as kube-controller-manager's csrcleaner would; none
// runs on the hub).
func TestAnsweredRequestsAreCollected(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second, func(c *Config) { c.Retention = time.Second })
	tok := f.token(bootstraptoken.CreateOptions{})
	req, x509req := request(t, "edge-5", tok.String(), nil)
	answer, err := f.c.join(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	f.issued(answer, "edge-5")
	name := requestName("edge-5", x509req)
	csrs := f.env.Kube.CertificatesV1().CertificateSigningRequests()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := csrs.Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("signed request %s still there 20 s after its 1 s retention (err %v)", name, err)
		}
		select {
		case <-f.c.changeOf(name):
		case <-time.After(500 * time.Millisecond):
		}
	}
}
