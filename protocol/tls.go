package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/internal/pki"
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
// it), ALPN, and a client certificate signed by clientCAs on every session
// connection, because the certificate is the agent's identity. A join
// connection (JoinALPN) comes without one: the agent has none yet.
func ServerTLSConfig(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	session := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		NextProtos:   []string{ALPN},
		// Agents keep no session cache, so a ticket is never used: it
		// would cost an encryption per handshake and stay in memory with
		// each connection (about 5 KiB each, measured at 10,000 agents).
		SessionTicketsDisabled: true,
	}
	join := session.Clone()
	join.ClientAuth = tls.NoClientCert
	join.NextProtos = []string{JoinALPN}
	// The certificate requirement depends on the protocol the client
	// offers, so it is chosen per connection.
	session.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if slices.Contains(hello.SupportedProtos, JoinALPN) {
			return join, nil
		}
		return nil, nil
	}
	return session
}

// ServerWebSocketTLSConfig is the hub's TLS configuration for agents that
// come over TCP (the WebSocket fallback): TLS 1.3, HTTP/1.1, and a client
// certificate verified against clientCAs if one is given. The agent
// protocol is the WebSocket subprotocol: a session (ALPN) needs the
// certificate, which ClusterFromConnectionState checks; a join
// (JoinALPN) comes without one.
func ServerWebSocketTLSConfig(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clientCAs,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		NextProtos:   []string{"http/1.1"},
		// As for QUIC (ServerTLSConfig): agents resume no session.
		SessionTicketsDisabled: true,
	}
}

// JoinTLSConfig is a joining agent's TLS configuration: TLS 1.3, JoinALPN,
// no client certificate, and the hub trusted only if its certificate chain
// leads to a CA whose public key has the SHA-256 pin (kubeadm's CA hash:
// "sha256:" and hex). The hub sends its CA with its certificate. The name
// dialled is not checked: the pin is the trust anchor.
func JoinTLSConfig(pin string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{JoinALPN},
		// Verification is VerifyConnection's, against the pinned CA.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinnedChain(cs.PeerCertificates, pin)
		},
	}
}

// verifyPinnedChain accepts a peer whose leaf is signed by a certificate in
// its chain whose public key has pin.
func verifyPinnedChain(certs []*x509.Certificate, pin string) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: the hub presented no certificate", ErrPeerIdentity)
	}
	roots := x509.NewCertPool()
	found := false
	for _, c := range certs[1:] {
		if pki.MatchesPin(c, pin) {
			roots.AddCert(c)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: no certificate the hub presented has the CA pin %s: wrong --hub-ca-hash, or not the hub you meant", ErrPeerIdentity, pin)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("%w: the hub's certificate is not signed by the pinned CA: %v", ErrPeerIdentity, err)
	}
	return nil
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
