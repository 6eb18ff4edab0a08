package protocol

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/internal/pki"
)

// listenJoinHub listens with the hub's configuration and a serving
// certificate whose chain carries the CA (withCA) or not.
func listenJoinHub(t *testing.T, p *testPKI, withCA bool) *quic.Listener {
	t.Helper()
	t.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	cert := p.issue(t, "hub", pki.ServerAuth)
	if withCA {
		cert.Certificate = append(cert.Certificate, p.ca.Cert.Raw)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", ServerTLSConfig(cert, p.pool), QUICConfig())
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveJoin plays the hub for one join connection: it checks the
// connection is a join without a client certificate, reads the request and
// answers resp.
func serveJoin(ctx context.Context, ln *quic.Listener, resp Message) (*JoinRequest, error) {
	conn, err := ln.Accept(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(0, "")
	cs := conn.ConnectionState().TLS
	if cs.NegotiatedProtocol != JoinALPN || len(cs.PeerCertificates) != 0 {
		return nil, errors.New("not a join connection without a certificate")
	}
	if _, err := ClusterFromConnectionState(cs); err == nil {
		return nil, errors.New("a join connection proved a cluster identity")
	}
	str, err := conn.AcceptStream(ctx)
	if err != nil {
		return nil, err
	}
	if kind, err := ReadStreamKind(str); err != nil || kind != StreamJoin {
		return nil, errors.Join(err, errors.New("not a join stream"))
	}
	m, err := NewReader(str, MaxJoinFrame).ReadMessage()
	if err != nil {
		return nil, err
	}
	if err := WriteMessage(str, resp); err != nil {
		return nil, err
	}
	str.Close()
	// Closing now could drop the answer: the agent closes once it read it.
	select {
	case <-conn.Context().Done():
	case <-ctx.Done():
	}
	req, _ := m.(*JoinRequest)
	return req, nil
}

// join dials as a joining agent with pin and returns the hub's answer.
func join(ctx context.Context, addr, pin string, req *JoinRequest) (Message, error) {
	conn, err := quic.DialAddr(ctx, addr, JoinTLSConfig(pin), QUICConfig())
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(0, "")
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if err := WriteStreamKind(str, StreamJoin); err != nil {
		return nil, err
	}
	if err := WriteMessage(str, req); err != nil {
		return nil, err
	}
	return NewReader(str, MaxJoinFrame).ReadMessage()
}

func TestQUICJoinWithPinnedCA(t *testing.T) {
	p := newTestPKI(t)
	ln := listenJoinHub(t, p, true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	want := &JoinResponse{Certificate: []byte("cert"), CACertificate: p.ca.CertPEM()}
	served := make(chan *JoinRequest, 1)
	go func() {
		req, err := serveJoin(ctx, ln, want)
		if err != nil {
			t.Errorf("hub: %v", err)
		}
		served <- req
	}()
	got, err := join(ctx, ln.Addr().String(), pki.Pin(p.ca.Cert), validJoinRequest())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(validJoinRequest(), <-served); diff != "" {
		t.Errorf("the hub read (-want +got):\n%s", diff)
	}
}

func TestQUICJoinRefusesTheWrongHub(t *testing.T) {
	tests := []struct {
		name     string
		withCA   bool
		pin      func(own, other *testPKI) string
		wantText string
	}{
		{"another CA's pin", true, func(_, other *testPKI) string { return pki.Pin(other.ca.Cert) }, "no certificate the hub presented has the CA pin"},
		{"the leaf's own pin", true, func(own, _ *testPKI) string {
			return pki.Pin(mustParse(t, own.issue(t, "hub", pki.ServerAuth)))
		}, "no certificate the hub presented has the CA pin"},
		{"a hub that sends no CA", false, func(own, _ *testPKI) string { return pki.Pin(own.ca.Cert) }, "no certificate the hub presented has the CA pin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own, other := newTestPKI(t), newTestPKI(t)
			ln := listenJoinHub(t, own, tt.withCA)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			go func() {
				_, _ = serveJoin(ctx, ln, &JoinResponse{Certificate: []byte("c"), CACertificate: []byte("ca")})
			}()
			_, err := join(ctx, ln.Addr().String(), tt.pin(own, other), validJoinRequest())
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("join = %v, want an error with %q", err, tt.wantText)
			}
		})
	}
}

// A client offering only the session protocol still needs a certificate.
func TestQUICSessionWithoutCertificateIsRefused(t *testing.T) {
	p := newTestPKI(t)
	ln := listenJoinHub(t, p, true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go func() {
		if conn, err := ln.Accept(ctx); err == nil {
			_, _ = conn.AcceptStream(ctx)
		}
	}()
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: p.pool, ServerName: hubServerName, NextProtos: []string{ALPN}}
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), cfg, QUICConfig())
	if err == nil {
		defer conn.CloseWithError(0, "")
		var str *quic.Stream
		if str, err = conn.OpenStreamSync(ctx); err == nil {
			if err = WriteStreamKind(str, StreamControl); err == nil {
				_, err = NewReader(str, 0).ReadMessage()
			}
		}
	}
	if err == nil {
		t.Fatal("a session without a client certificate was accepted")
	}
	var te *quic.TransportError
	if !errors.As(err, &te) || te.ErrorCode != quic.TransportErrorCode(0x100+116) { // certificate_required
		t.Errorf("error %v, want the TLS alert certificate_required", err)
	}
}

func mustParse(t *testing.T, c tls.Certificate) *x509.Certificate {
	t.Helper()
	parsed, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}
