package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

// Files expected in Config.CertDir.
const (
	CAFile   = "ca.crt"  // PEM CA certificate(s) that signed the hub's certificate
	CertFile = "tls.crt" // PEM client certificate, CommonName "cluster:<name>"
	KeyFile  = "tls.key" // PEM private key of tls.crt
)

// loadTLSConfig reads the certificates in cfg.CertDir and returns the client
// TLS configuration for dialing cfg.Hub. It checks that the client
// certificate names cfg.ClusterName and is valid at now, so that a wrong
// certificate fails at startup with a clear message instead of as a TLS
// alert from the hub.
func loadTLSConfig(cfg Config, now time.Time) (*tls.Config, error) {
	caPath := filepath.Join(cfg.CertDir, CAFile)
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("read hub CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("hub CA %s: no PEM certificate found", caPath)
	}
	cert, err := loadClientCert(cfg.CertDir)
	if err != nil {
		return nil, err
	}
	if err := checkClientCert(cert.Leaf, cfg.ClusterName, now); err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", filepath.Join(cfg.CertDir, CertFile), err)
	}
	host, _, err := net.SplitHostPort(cfg.Hub)
	if err != nil {
		return nil, fmt.Errorf("hub address %q: %w", cfg.Hub, err)
	}
	return protocol.ClientTLSConfig(cert, roots, host), nil
}

// loadClientCert reads tls.crt and tls.key, naming the file in every error.
func loadClientCert(dir string) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read client certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read client key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate %s with key %s: %w", certPath, keyPath, err)
	}
	if cert.Leaf == nil { // X509KeyPair fills Leaf unless GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("client certificate %s: %w", certPath, err)
		}
	}
	return cert, nil
}

// checkClientCert verifies that leaf is this cluster's identity and current.
func checkClientCert(leaf *x509.Certificate, cluster string, now time.Time) error {
	if want := protocol.ClusterCommonName(cluster); leaf.Subject.CommonName != want {
		return fmt.Errorf("common name is %q, but cluster %q needs %q", leaf.Subject.CommonName, cluster, want)
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
