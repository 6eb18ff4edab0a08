package join

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
)

// TestAgentsFromBeforeTheAgentCAGetHubCACertificates: a join or renewal
// that does not say AcceptsAgentCA (an agent older than the agent CA,
// which checks certificates against the hub CA alone) gets a certificate
// of the hub CA and nothing after it, so upgrading the hub first breaks
// no agent at its next renewal.
func TestAgentsFromBeforeTheAgentCAGetHubCACertificates(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 10*time.Second)
	tok := f.token(bootstraptoken.CreateOptions{Cluster: "old-agent"})
	req, _ := request(t, "old-agent", tok.String(), nil)
	req.AcceptsAgentCA = false
	answer, err := f.c.join(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := answer.(*protocol.JoinResponse)
	if !ok || resp.Pending {
		t.Fatalf("join answered %#v, want a certificate", answer)
	}
	joined := f.hubCACertificate(resp.Certificate)

	again, _ := request(t, "old-agent", "", nil)
	renewal, err := f.c.Renew(t.Context(), "old-agent", joined.SerialNumber, again.CSR, false)
	if err != nil {
		t.Fatal(err)
	}
	renewed, ok := renewal.(*protocol.CertificateRenewResponse)
	if !ok {
		t.Fatalf("renewal answered %#v, want a certificate", renewal)
	}
	cert := f.hubCACertificate(renewed.Certificate)
	if current, previous := f.serials("old-agent"); current != cert.SerialNumber.Text(16) || previous != joined.SerialNumber.Text(16) {
		t.Errorf("serials %s, previous %s; want the renewal's %s, previous %s", current, previous, cert.SerialNumber.Text(16), joined.SerialNumber.Text(16))
	}
	if n := f.c.SignerCounts().HubCAIssued; n != 2 {
		t.Errorf("SignerCounts().HubCAIssued = %d, want 2 (the join and the renewal)", n)
	}
}

// hubCACertificate checks that certPEM is one certificate, signed by the
// hub CA, and returns it.
func (f *fixture) hubCACertificate(certPEM []byte) *x509.Certificate {
	f.t.Helper()
	block, rest := pem.Decode(certPEM)
	if block == nil || len(rest) > 0 {
		f.t.Fatalf("want exactly one PEM certificate, got %q", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(f.ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		f.t.Errorf("certificate does not verify with the hub CA, as an agent from before the agent CA checks it: %v", err)
	}
	return cert
}
