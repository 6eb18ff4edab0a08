package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterCommonNamePrefix starts the CommonName of every agent certificate.
// The prefix keeps agent identities apart from other certificates the same CA
// may sign (the hub's own serving certificate, operators).
const ClusterCommonNamePrefix = "cluster:"

// ClusterCommonName returns the certificate CommonName for cluster name.
func ClusterCommonName(name string) string {
	return ClusterCommonNamePrefix + name
}

// ServerTLSConfig is the hub's TLS configuration: TLS 1.3 only (QUIC requires
// it), ALPN, and a client certificate signed by clientCAs on every
// connection, because the certificate is the agent's identity.
func ServerTLSConfig(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		NextProtos:   []string{ALPN},
	}
}

// ClientTLSConfig is the agent's TLS configuration: TLS 1.3 only, ALPN, the
// agent's certificate, and the hub verified against rootCAs as serverName.
func ClientTLSConfig(cert tls.Certificate, rootCAs *x509.CertPool, serverName string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      rootCAs,
		ServerName:   serverName,
		NextProtos:   []string{ALPN},
	}
}

// ClusterFromConnectionState returns the cluster name proven by the peer's
// verified certificate, whose CommonName must be "cluster:<name>" with name a
// DNS-1123 subdomain. Only verified chains count: PeerCertificates is filled
// in even when verification was skipped, so it proves nothing on its own.
func ClusterFromConnectionState(cs tls.ConnectionState) (string, error) {
	if !cs.HandshakeComplete {
		return "", fmt.Errorf("%w: TLS handshake not complete", ErrPeerIdentity)
	}
	if cs.NegotiatedProtocol != ALPN {
		return "", fmt.Errorf("%w: negotiated protocol %q, want %q", ErrPeerIdentity, cs.NegotiatedProtocol, ALPN)
	}
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("%w: peer presented no verified certificate", ErrPeerIdentity)
	}
	cn := cs.VerifiedChains[0][0].Subject.CommonName
	name, ok := strings.CutPrefix(cn, ClusterCommonNamePrefix)
	if !ok {
		return "", fmt.Errorf("%w: certificate common name %q does not start with %q",
			ErrPeerIdentity, truncate(cn), ClusterCommonNamePrefix)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("%w: cluster name %q in certificate: %s",
			ErrPeerIdentity, truncate(name), strings.Join(errs, ", "))
	}
	return name, nil
}
