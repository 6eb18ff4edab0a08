package pki

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIssueVerifiesAgainstCA(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		req   Request
		usage x509.ExtKeyUsage
		dns   string
	}{
		{"server", Request{CommonName: "api", DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: ServerAuth, ValidFor: time.Hour}, x509.ExtKeyUsageServerAuth, "localhost"},
		{"client", Request{CommonName: "admin", Organization: []string{"system:masters"}, Usage: ClientAuth, ValidFor: time.Hour}, x509.ExtKeyUsageClientAuth, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kp, err := ca.Issue(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, kp.CertPEM)
			roots := x509.NewCertPool()
			roots.AddCert(ca.Cert)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.dns, KeyUsages: []x509.ExtKeyUsage{tt.usage}}); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if got := cert.Subject.Organization; strings.Join(got, ",") != strings.Join(tt.req.Organization, ",") {
				t.Errorf("organization = %v, want %v", got, tt.req.Organization)
			}
		})
	}
}

func TestIssueRejectsBadRequests(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]Request{
		"no common name": {ValidFor: time.Hour},
		"no validity":    {CommonName: "x"},
	} {
		if _, err := ca.Issue(req); err == nil {
			t.Errorf("%s: Issue succeeded, want error", name)
		}
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("round-trip", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	writeFile(t, certFile, ca.CertPEM())
	writeFile(t, keyFile, keyPEM)

	loaded, err := LoadCA(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Fatal("loaded certificate differs")
	}
	if _, err := loaded.Issue(Request{CommonName: "leaf", ValidFor: time.Hour}); err != nil {
		t.Fatalf("issue with loaded CA: %v", err)
	}
}

func TestLoadCARejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Request{CommonName: "leaf", ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	writeFile(t, garbage, []byte("not pem"))
	leafCert, leafKey := filepath.Join(dir, "leaf.crt"), filepath.Join(dir, "leaf.key")
	writeFile(t, leafCert, leaf.CertPEM)
	writeFile(t, leafKey, leaf.KeyPEM)

	tests := []struct{ name, cert, key, want string }{
		{"missing", filepath.Join(dir, "none"), leafKey, "read CA certificate"},
		{"garbage cert", garbage, leafKey, "no PEM CERTIFICATE"},
		{"not a CA", leafCert, leafKey, "is not a CA"},
	}
	for _, tt := range tests {
		_, err := LoadCA(tt.cert, tt.key)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestKeyPairAsTLSCertificate(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(Request{CommonName: "edge-1", Usage: ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf == nil || cert.Leaf.Subject.CommonName != "edge-1" || cert.PrivateKey == nil {
		t.Errorf("TLS certificate = leaf %v, key %T; want edge-1's certificate with its key", cert.Leaf, cert.PrivateKey)
	}
	if _, err := (&KeyPair{CertPEM: kp.CertPEM, KeyPEM: []byte("not a key")}).TLSCertificate(); err == nil {
		t.Error("a key pair with a broken key loaded")
	}
}
