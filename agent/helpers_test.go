package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// testPKI is a CA that signs the test hub's serving certificate and agents'
// client certificates.
type testPKI struct {
	ca   *pki.CA
	pool *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := pki.NewCA("flotilla agent test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &testPKI{ca: ca, pool: pool}
}

func (p *testPKI) issue(t *testing.T, req pki.Request) *pki.KeyPair {
	t.Helper()
	if req.ValidFor == 0 {
		req.ValidFor = time.Hour
	}
	kp, err := p.ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// tlsCertificate issues req as a tls.Certificate.
func (p *testPKI) tlsCertificate(t *testing.T, req pki.Request) tls.Certificate {
	t.Helper()
	kp := p.issue(t, req)
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// hubTLS is the test hub's TLS configuration, valid for 127.0.0.1 and
// localhost, requiring client certificates from this CA on sessions; its
// serving chain carries the CA, as the real hub's does, for joining agents
// to find by its pin.
func (p *testPKI) hubTLS(t *testing.T) *tls.Config {
	t.Helper()
	cert := p.tlsCertificate(t, pki.Request{CommonName: "flotilla-hub", Usage: pki.ServerAuth,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	cert.Certificate = append(cert.Certificate, p.ca.Cert.Raw)
	return protocol.ServerTLSConfig(cert, p.pool)
}

// certDir writes ca.crt (this CA) and a client certificate with the given
// common name into a new temporary folder.
func (p *testPKI) certDir(t *testing.T, commonName string) string {
	t.Helper()
	kp := p.issue(t, pki.Request{CommonName: commonName, Usage: pki.ClientAuth})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, credstore.CAFile), p.ca.CertPEM())
	writeFile(t, filepath.Join(dir, credstore.CertFile), kp.CertPEM)
	writeFile(t, filepath.Join(dir, credstore.KeyFile), kp.KeyPEM)
	return dir
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// testLogger logs to the test output; debug lines only with -v.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelInfo
	if testing.Verbose() {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// discard is a logger for tests that do not look at logs.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// loadTLSConfig reads the credentials in cfg.CertDir as an agent does.
func loadTLSConfig(cfg Config, now time.Time) (*tls.Config, error) {
	store := credstore.NewDir(cfg.CertDir, discard)
	c, err := store.Load(context.Background())
	if err != nil {
		return nil, err
	}
	return tlsConfigFrom(cfg, store, c, now)
}
