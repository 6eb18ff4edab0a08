// Package ca keeps the hub's certificate authorities and its other keys in
// the data directory (DATA/pki): the hub CA, which signs user and serving
// certificates and which agents pin; the agent CA, which signs agent
// certificates alone, so that they authenticate agent sessions and nothing
// else (the Kubernetes API trusts the hub CA only); the QUIC serving
// certificate, and the stateless-reset key.
package ca

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/quic-go/quic-go"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/internal/atomicfile"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// Certificate lifetimes. Agent certificates are rotated by bootstrap later
// (DESIGN §8); until then they last a year.
const (
	caValidity      = 10 * 365 * 24 * time.Hour
	agentValidity   = 365 * 24 * time.Hour
	servingValidity = 365 * 24 * time.Hour
)

// pkiDir holds the hub's CA inside its data directory.
func pkiDir(dataDir string) string { return filepath.Join(dataDir, "pki") }

// EnsureCA loads the hub CA from DATA/pki, creating it on first use.
func EnsureCA(dataDir string) (*pki.CA, error) {
	return ensureCA(dataDir, "ca", "flotilla-hub-ca", "hub CA")
}

// EnsureAgentCA loads the agent CA from DATA/pki (agent-ca.crt,
// agent-ca.key), creating it on first use: it signs agent certificates,
// which agent sessions accept and the hub's Kubernetes API does not.
func EnsureAgentCA(dataDir string) (*pki.CA, error) {
	return ensureCA(dataDir, "agent-ca", "flotilla-agent-ca", "agent CA")
}

// ensureCA loads DATA/pki/base.crt and base.key, or creates a CA called
// commonName there when neither exists; what names it in errors.
func ensureCA(dataDir, base, commonName, what string) (*pki.CA, error) {
	dir := pkiDir(dataDir)
	certFile, keyFile := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	ca, err := pki.LoadCA(certFile, keyFile)
	if err == nil {
		return ca, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s in %s: %w", what, dir, err)
	}
	if _, statErr := os.Stat(certFile); statErr == nil {
		return nil, fmt.Errorf("%s in %s: %w", what, dir, err) // certificate without key: do not overwrite
	}
	ca, err = pki.NewCA(commonName, caValidity)
	if err != nil {
		return nil, err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := writeFiles(map[string][]byte{keyFile: keyPEM, certFile: ca.CertPEM()}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ca, nil
}

// writeFiles writes each file atomically, readable only by its owner.
func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ServingCertificate issues the hub's QUIC serving certificate for loopback,
// this host's name and the extra names or addresses in sans. Its chain
// carries the CA: a joining agent knows only the CA's pin and finds the CA
// there.
func ServingCertificate(ca *pki.CA, sans []string) (tls.Certificate, error) {
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if host, err := os.Hostname(); err == nil {
		dnsNames = append(dnsNames, host)
	}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, san)
		}
	}
	kp, err := ca.Issue(pki.Request{CommonName: "flotilla-hub", DNSNames: dnsNames, IPAddresses: ips, Usage: pki.ServerAuth, ValidFor: servingValidity})
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		return tls.Certificate{}, err
	}
	cert.Certificate = append(cert.Certificate, ca.Cert.Raw)
	return cert, nil
}

// Pool is a certificate pool of cas.
func Pool(cas ...*pki.CA) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return pool
}

// IssueAgentCertificate writes ca.crt (the hub CA, which the agent
// verifies the hub with), tls.crt and tls.key (signed by the agent CA) for
// the agent of cluster into outDir, from the CAs in dataDir. record, if
// not nil, is given the certificate's serial before anything is written:
// its error discards the certificate.
func IssueAgentCertificate(dataDir, cluster, outDir string, record func(serial *big.Int) error) error {
	if msgs := validation.IsDNS1123Subdomain(cluster); len(msgs) > 0 {
		return fmt.Errorf("--cluster %q: %v", cluster, msgs)
	}
	ca, err := EnsureCA(dataDir)
	if err != nil {
		return err
	}
	agentCA, err := EnsureAgentCA(dataDir)
	if err != nil {
		return err
	}
	kp, err := agentCA.Issue(pki.Request{CommonName: protocol.ClusterCommonName(cluster), Usage: pki.ClientAuth, ValidFor: agentValidity})
	if err != nil {
		return err
	}
	if record != nil {
		cert, err := kp.Certificate()
		if err != nil {
			return err
		}
		if err := record(cert.SerialNumber); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return fmt.Errorf("--out %s: %w", outDir, err)
	}
	return writeFiles(map[string][]byte{
		filepath.Join(outDir, "ca.crt"):  ca.CertPEM(),
		filepath.Join(outDir, "tls.crt"): kp.CertPEM,
		filepath.Join(outDir, "tls.key"): kp.KeyPEM,
	})
}

// LoadStatelessResetKey reads DATA/pki/stateless-reset.key, creating it on
// first use. With the same key after a restart (and on every replica), the
// hub answers packets of connections it no longer knows with a stateless
// reset, so agents notice at once and reconnect instead of waiting for
// their idle timeout.
func LoadStatelessResetKey(dataDir string) (*quic.StatelessResetKey, error) {
	var key quic.StatelessResetKey
	data, err := loadOrCreateKey(dataDir, "stateless-reset.key", len(key))
	if err != nil {
		return nil, fmt.Errorf("stateless reset key: %w", err)
	}
	copy(key[:], data)
	return &key, nil
}

// GossipKeySize is the length of the replicas' gossip key (AES-256).
const GossipKeySize = 32

// LoadGossipKey reads DATA/pki/gossip.key, creating it on first use: the
// key that encrypts and authenticates the replicas' gossip, shared by the
// replicas like the CA. One key, one use: it used to be derived from the
// stateless-reset key, so whatever held that key could join the gossip.
func LoadGossipKey(dataDir string) ([]byte, error) {
	key, err := loadOrCreateKey(dataDir, "gossip.key", GossipKeySize)
	if err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	return key, nil
}

// loadOrCreateKey reads DATA/pki/name, which must hold size bytes, or
// writes size random bytes there when it does not exist.
func loadOrCreateKey(dataDir, name string, size int) ([]byte, error) {
	path := filepath.Join(pkiDir(dataDir), name)
	data, err := os.ReadFile(path)
	switch {
	case err == nil && len(data) == size:
		return data, nil
	case err == nil:
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, len(data), size)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	key := make([]byte, size)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(pkiDir(dataDir), 0o700); err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{path: key}); err != nil {
		return nil, err
	}
	return key, nil
}
