package join

import (
	"crypto/x509"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// serials returns the current and previous certificate serials recorded on
// cluster.
func (f *fixture) serials(cluster string) (current, previous string) {
	f.t.Helper()
	c, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(f.t.Context(), cluster, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c.Annotations[v1alpha1.AnnotationAgentCertificateSerial], c.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]
}

// renewed checks answer is a renewed certificate for cluster and returns it.
func (f *fixture) renewed(answer protocol.Message, cluster string) *x509.Certificate {
	f.t.Helper()
	resp, ok := answer.(*protocol.CertificateRenewResponse)
	if !ok {
		f.t.Fatalf("answer %#v, want a renewed certificate", answer)
	}
	return f.issued(&protocol.JoinResponse{Certificate: resp.Certificate, CACertificate: resp.CACertificate}, cluster)
}

func TestRenewIsApprovedInManualModeAndKeepsThePreviousSerial(t *testing.T) {
	f := newFixture(t, ApprovalManual, 20*time.Second)
	const cluster = "edge-renew-1"
	old := big.NewInt(0xabc)
	if err := RecordSerial(t.Context(), f.env.Flotilla, cluster, old, Registration{}); err != nil {
		t.Fatal(err)
	}
	req, x509req := request(t, cluster, "", nil)
	answer, err := f.c.Renew(t.Context(), cluster, old, req.CSR, true)
	if err != nil {
		t.Fatal(err)
	}
	cert := f.renewed(answer, cluster)
	if current, previous := f.serials(cluster); current != cert.SerialNumber.Text(16) || previous != "abc" {
		t.Errorf("serials %q, previous %q; want %q, previous abc", current, previous, cert.SerialNumber.Text(16))
	}
	csr, err := f.env.Kube.CertificatesV1().CertificateSigningRequests().Get(t.Context(), requestName(cluster, x509req), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := csr.Annotations[RenewalOfAnnotation]; got != "abc" {
		t.Errorf("annotation %s = %q, want abc", RenewalOfAnnotation, got)
	}
	if _, ok := csr.Annotations[TokenAnnotation]; ok {
		t.Errorf("a renewal has a token annotation: %v", csr.Annotations)
	}
	var approval *certificatesv1.CertificateSigningRequestCondition
	for i, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			approval = &csr.Status.Conditions[i]
		}
	}
	if approval == nil || approval.Reason != reasonRenewal || !strings.Contains(approval.Message, "proved its identity") || !strings.Contains(approval.Message, "serial abc") {
		t.Errorf("approval %+v, want %s saying the agent proved its identity with certificate abc", approval, reasonRenewal)
	}

	// A second renewal at once is refused: the hub allows one a minute.
	again, _ := request(t, cluster, "", nil)
	answer, err = f.c.Renew(t.Context(), cluster, cert.SerialNumber, again.CSR, true)
	if e, ok := answer.(*protocol.Error); err != nil || !ok || e.Code != protocol.CodeRateLimited || !strings.Contains(e.Message, "renew again after") {
		t.Errorf("second renewal: %#v, %v; want RateLimited", answer, err)
	}

	// A join (or certs issue) supersedes both.
	joined := big.NewInt(0xdef)
	if err := RecordSerial(t.Context(), f.env.Flotilla, cluster, joined, Registration{}); err != nil {
		t.Fatal(err)
	}
	if current, previous := f.serials(cluster); current != "def" || previous != "" {
		t.Errorf("after a join: serial %q, previous %q; want def and none", current, previous)
	}
}

func TestRenewRefusals(t *testing.T) {
	f := newFixture(t, ApprovalAuto, 20*time.Second)
	const cluster = "edge-renew-2"
	if err := RecordSerial(t.Context(), f.env.Flotilla, cluster, big.NewInt(0x10), Registration{}); err != nil {
		t.Fatal(err)
	}
	// Same identity only.
	other, _ := request(t, "edge-renew-3", "", nil)
	answer, err := f.c.Renew(t.Context(), cluster, big.NewInt(0x10), other.CSR, true)
	if e, ok := answer.(*protocol.Error); err != nil || !ok || e.Code != protocol.CodeCSRRefused || !strings.Contains(e.Message, `want "cluster:edge-renew-2"`) {
		t.Errorf("renewal for another cluster: %#v, %v; want CSRRefused", answer, err)
	}
	// A certificate a join superseded cannot renew.
	req, _ := request(t, cluster, "", nil)
	answer, err = f.c.Renew(t.Context(), cluster, big.NewInt(0x9), req.CSR, true)
	if e, ok := answer.(*protocol.Error); err != nil || !ok || e.Code != protocol.CodeCSRDenied || !strings.Contains(e.Message, "certificate 9 of cluster edge-renew-2 was superseded by 10") {
		t.Errorf("renewal of a superseded certificate: %#v, %v; want CSRDenied", answer, err)
	}
	if current, previous := f.serials(cluster); current != "10" || previous != "" {
		t.Errorf("serial %q, previous %q; want 10 and none", current, previous)
	}
}

func TestRecordRenewalFromThePreviousCertificate(t *testing.T) {
	f := newFixture(t, ApprovalAuto, time.Second)
	const cluster = "edge-renew-4"
	ctx := t.Context()
	if err := RecordSerial(ctx, f.env.Flotilla, cluster, big.NewInt(1), Registration{}); err != nil {
		t.Fatal(err)
	}
	// Renewed to 2, which the agent never received: it renews again with 1.
	for _, serial := range []int64{2, 3} {
		if err := recordRenewal(ctx, f.env.Flotilla, cluster, big.NewInt(serial), "1"); err != nil {
			t.Fatal(err)
		}
		if current, previous := f.serials(cluster); current != big.NewInt(serial).Text(16) || previous != "1" {
			t.Errorf("serial %q, previous %q; want %d, previous 1", current, previous, serial)
		}
	}
	// 2 is neither current nor previous any more.
	if err := recordRenewal(ctx, f.env.Flotilla, cluster, big.NewInt(4), "2"); err == nil || !strings.Contains(err.Error(), "superseded") {
		t.Errorf("renewal of 2 = %v, want superseded", err)
	}
}
