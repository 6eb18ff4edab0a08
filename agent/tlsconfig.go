package agent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/protocol"
)

// tlsConfigFrom returns the client TLS configuration for dialing cfg.Hub
// with the credentials c, read from store. It checks that the client
// certificate names cfg.ClusterName and is valid at now, so that a wrong
// certificate fails at startup with a clear message instead of as a TLS
// alert from the hub.
func tlsConfigFrom(cfg Config, store credstore.Store, c credstore.Credentials, now time.Time) (*tls.Config, error) {
	if c.CA == nil {
		return nil, fmt.Errorf("read hub CA: %w", store.Absent(credstore.CAFile))
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.CA) {
		return nil, fmt.Errorf("hub CA %s: no PEM certificate found", store.Location(credstore.CAFile))
	}
	cert, err := clientCert(store, c)
	if err != nil {
		return nil, err
	}
	if err := checkClientCert(cert.Leaf, cfg.ClusterName, now); err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", store.Location(credstore.CertFile), err)
	}
	// The first replica's host; each dial names the host it dials.
	hubs := splitHubs(cfg.Hub)
	if len(hubs) == 0 {
		return nil, errors.New("no hub address")
	}
	host, _, err := net.SplitHostPort(hubs[0])
	if err != nil {
		return nil, fmt.Errorf("hub address %q: %w", hubs[0], err)
	}
	return protocol.ClientTLSConfig(cert, roots, host), nil
}

// clientCert parses tls.crt and tls.key, naming the item in every error.
func clientCert(store credstore.Store, c credstore.Credentials) (tls.Certificate, error) {
	if c.Cert == nil {
		return tls.Certificate{}, fmt.Errorf("read client certificate: %w", store.Absent(credstore.CertFile))
	}
	if c.Key == nil {
		return tls.Certificate{}, fmt.Errorf("read client key: %w", store.Absent(credstore.KeyFile))
	}
	cert, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate %s with key %s: %w", store.Location(credstore.CertFile), store.Location(credstore.KeyFile), err)
	}
	if cert.Leaf == nil { // X509KeyPair fills Leaf unless GODEBUG x509keypairleaf=0
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("client certificate %s: %w", store.Location(credstore.CertFile), err)
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

// issuerPools are the pools that verify a certificate the hub issued,
// chain being what it sent (the certificate first): roots are trusted plus
// the self-signed CA certificates after the certificate, the other ones
// intermediates. The hub signs agent certificates with an agent CA of its
// own, which its Kubernetes API does not trust, and sends it there; the
// answer comes over a connection the hub CA (trusted) authenticated,
// which vouches for it. Hubs from before the agent CA sign with the hub
// CA itself and send the certificate alone.
func issuerPools(trusted *x509.CertPool, chain []*x509.Certificate) (roots, intermediates *x509.CertPool) {
	roots, intermediates = trusted.Clone(), x509.NewCertPool()
	for _, c := range chain[1:] {
		if c.IsCA && bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil {
			roots.AddCert(c)
		} else {
			intermediates.AddCert(c)
		}
	}
	return roots, intermediates
}
