package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// handshake runs a TLS handshake over an in-memory pipe and returns the
// server's view of the connection.
func handshake(t *testing.T, server, client *tls.Config) tls.ConnectionState {
	t.Helper()
	sc, cc := net.Pipe()
	t.Cleanup(func() { sc.Close(); cc.Close() })
	srv, cli := tls.Server(sc, server), tls.Client(cc, client)
	clientErr := make(chan error, 1)
	go func() { clientErr <- cli.HandshakeContext(t.Context()) }()
	if err := srv.HandshakeContext(t.Context()); err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	if err := <-clientErr; err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if got := cli.ConnectionState(); got.Version != tls.VersionTLS13 || got.NegotiatedProtocol != ALPN {
		t.Errorf("client negotiated version %x protocol %q, want TLS 1.3 and %q", got.Version, got.NegotiatedProtocol, ALPN)
	}
	return srv.ConnectionState()
}

func TestClusterFromHandshake(t *testing.T) {
	p := newTestPKI(t)
	serverCfg := ServerTLSConfig(p.issue(t, "hub", pki.ServerAuth), p.pool)
	tests := []struct {
		name       string
		commonName string
		want       string
		wantText   string
	}{
		{name: "cluster identity", commonName: ClusterCommonName("member-1"), want: "member-1"},
		{name: "no prefix", commonName: "member-1", wantText: `common name "member-1" does not start with "cluster:"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientCfg := ClientTLSConfig(p.issue(t, tt.commonName, pki.ClientAuth), p.pool, hubServerName)
			got, err := ClusterFromConnectionState(handshake(t, serverCfg, clientCfg))
			checkIdentity(t, got, err, tt.want, tt.wantText)
		})
	}
}

// The remaining cases cannot come out of a successful handshake with these
// configurations, so they are built by hand.
func TestClusterFromConnectionStateRejects(t *testing.T) {
	withCN := func(cn string) tls.ConnectionState {
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		return tls.ConnectionState{
			HandshakeComplete:  true,
			NegotiatedProtocol: ALPN,
			PeerCertificates:   []*x509.Certificate{cert},
			VerifiedChains:     [][]*x509.Certificate{{cert}},
		}
	}
	unverified := withCN("cluster:member-1")
	unverified.VerifiedChains = nil
	incomplete := withCN("cluster:member-1")
	incomplete.HandshakeComplete = false
	otherALPN := withCN("cluster:member-1")
	otherALPN.NegotiatedProtocol = "h3"
	tests := []struct {
		name     string
		cs       tls.ConnectionState
		want     string
		wantText string
	}{
		{name: "valid", cs: withCN("cluster:eu-west.prod"), want: "eu-west.prod"},
		{name: "handshake incomplete", cs: incomplete, wantText: "handshake not complete"},
		{name: "other ALPN", cs: otherALPN, wantText: `negotiated protocol "h3"`},
		{name: "unverified certificate", cs: unverified, wantText: "no verified certificate"},
		{name: "empty name", cs: withCN("cluster:"), wantText: `cluster name ""`},
		{name: "invalid name", cs: withCN("cluster:Member_1"), wantText: `cluster name "Member_1"`},
		{name: "prefix in wrong case", cs: withCN("Cluster:member-1"), wantText: "does not start with"},
		{name: "hub certificate", cs: withCN("hub"), wantText: "does not start with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClusterFromConnectionState(tt.cs)
			checkIdentity(t, got, err, tt.want, tt.wantText)
		})
	}
}

func checkIdentity(t *testing.T, got string, err error, want, wantText string) {
	t.Helper()
	if wantText == "" {
		if err != nil || got != want {
			t.Fatalf("ClusterFromConnectionState = %q, %v; want %q", got, err, want)
		}
		return
	}
	if !errors.Is(err, ErrPeerIdentity) {
		t.Fatalf("ClusterFromConnectionState = %q, %v; want ErrPeerIdentity", got, err)
	}
	if !strings.Contains(err.Error(), wantText) {
		t.Errorf("error %q does not contain %q", err, wantText)
	}
}

func TestTLSConfigs(t *testing.T) {
	p := newTestPKI(t)
	server := ServerTLSConfig(p.issue(t, "hub", pki.ServerAuth), p.pool)
	client := ClientTLSConfig(p.issue(t, ClusterCommonName("m"), pki.ClientAuth), p.pool, hubServerName)
	for name, cfg := range map[string]*tls.Config{"server": server, "client": client} {
		if cfg.MinVersion != tls.VersionTLS13 {
			t.Errorf("%s MinVersion = %x, want TLS 1.3", name, cfg.MinVersion)
		}
		if len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != ALPN {
			t.Errorf("%s NextProtos = %q, want [%q]", name, cfg.NextProtos, ALPN)
		}
	}
	if server.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("server ClientAuth = %v, want RequireAndVerifyClientCert", server.ClientAuth)
	}
	if client.ServerName != hubServerName {
		t.Errorf("client ServerName = %q, want %q", client.ServerName, hubServerName)
	}
}
