package agent

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/syncbuf"
	"github.com/flotilla-io/flotilla/protocol"
)

// serveRenew answers one renew stream as h.renew says.
func (h *testHub) serveRenew(c *hubConn, str *quic.Stream) {
	m, err := protocol.NewReader(str, protocol.MaxRenewFrame).ReadMessage()
	req, ok := m.(*protocol.CertificateRenewRequest)
	if err != nil || !ok {
		c.conn.CloseWithError(protocol.CloseProtocolError, "want a CertificateRenewRequest")
		return
	}
	if h.renew == nil {
		// A test about something else: the agent keeps its certificate
		// and its session, and tries again later.
		if protocol.WriteMessage(str, &protocol.Error{Code: protocol.CodeUnavailable, Message: "this test hub renews nothing"}) == nil {
			str.Close()
		}
		return
	}
	h.record(hubEvent{kind: "renewal", conn: c.id, renewal: req})
	if protocol.WriteMessage(str, h.renew(int(h.renews.Add(1)), req)) == nil {
		str.Close()
	}
}

var testSerial atomic.Int64

// certFor signs a client certificate for pub valid from notBefore to
// notAfter.
func (p *testPKI) certFor(t *testing.T, pub crypto.PublicKey, commonName string, notBefore, notAfter time.Time) ([]byte, *x509.Certificate) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(1000 + testSerial.Add(1)),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca.Cert, pub, p.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert
}

// renewAnswer answers the test hub's nth renewal.
type renewAnswer func(t *testing.T, p *testPKI, req *protocol.CertificateRenewRequest) protocol.Message

// renewed issues the requested certificate for an hour.
func renewed(t *testing.T, p *testPKI, req *protocol.CertificateRenewRequest) protocol.Message {
	return renewedAs("")(t, p, req)
}

// renewedAs issues it for commonName (the request's if empty).
func renewedAs(commonName string) renewAnswer {
	return func(t *testing.T, p *testPKI, req *protocol.CertificateRenewRequest) protocol.Message {
		csr, err := parseCSR(req.CSR)
		if err != nil {
			t.Errorf("test hub: %v", err)
			return &protocol.Error{Code: protocol.CodeCSRRefused, Message: err.Error()}
		}
		if commonName == "" {
			commonName = csr.Subject.CommonName
		}
		now := time.Now()
		certPEM, _ := p.certFor(t, csr.PublicKey, commonName, now.Add(-time.Minute), now.Add(time.Hour))
		return &protocol.CertificateRenewResponse{Certificate: certPEM, CACertificate: p.ca.CertPEM()}
	}
}

// rotationSetup is an agent whose certificate in its certificate directory
// is valid from notBefore to notAfter (relative to its fake clock), and a
// test hub that renews it as answers say.
type rotationSetup struct {
	pki     *testPKI
	hub     *testHub
	clock   *timerClock
	logs    *syncbuf.Buffer
	dir     string
	certPEM []byte // the agent's first certificate
	keyPEM  []byte
	agent   *Agent
}

func newRotationSetup(t *testing.T, notBefore, notAfter time.Duration, answers ...renewAnswer) *rotationSetup {
	t.Helper()
	s := &rotationSetup{pki: newTestPKI(t), clock: newTimerClock(), logs: &syncbuf.Buffer{}, dir: t.TempDir()}
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if s.keyPEM, err = pki.EncodeKey(key); err != nil {
		t.Fatal(err)
	}
	now := s.clock.Now()
	s.certPEM, _ = s.pki.certFor(t, key.Public(), protocol.ClusterCommonName(testCluster), now.Add(notBefore), now.Add(notAfter))
	writeFile(t, filepath.Join(s.dir, credstore.CAFile), s.pki.ca.CertPEM())
	writeFile(t, filepath.Join(s.dir, credstore.CertFile), s.certPEM)
	writeFile(t, filepath.Join(s.dir, credstore.KeyFile), s.keyPEM)
	// A lease of an hour: the fake clock jumps by minutes, and the renewals
	// it sends meanwhile must not time out.
	welcome := func(*protocol.Hello) protocol.Message {
		return &protocol.Welcome{ProtocolVersion: protocol.Version, HubID: "test-hub", HubTime: time.Now(),
			LeaseDurationSeconds: 3600, RenewIntervalMillis: 200}
	}
	s.hub = startTestHub(t, s.pki.hubTLS(t), welcome, func(h *testHub) {
		h.renew = func(n int, req *protocol.CertificateRenewRequest) protocol.Message {
			return answers[min(n, len(answers))-1](t, s.pki, req)
		}
	})
	cfg := Config{Hub: s.hub.addr(), ClusterName: testCluster, CertDir: s.dir, LeaseDuration: time.Hour,
		StatusInterval: 300 * time.Millisecond, Version: "test", Clock: s.clock,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(s.logs, t.Output()), nil))}
	tlsConf, err := loadTLSConfig(cfg.withDefaults(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.agent = newFakeAgent(t, cfg, tlsConf, fakeCluster(1), healthy)
	return s
}

// waitTimerIn returns the duration of the next timer the agent makes that
// lasts from lo to hi, skipping others (fencing makes timers too).
func (c *timerClock) waitTimerIn(t *testing.T, what string, lo, hi time.Duration) time.Duration {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case d := <-c.timers:
			if d >= lo && d <= hi {
				return d
			}
		case <-deadline:
			t.Fatalf("timed out after %v waiting for the agent to wait %v to %v before %s", waitTimeout, lo, hi, what)
			return 0
		}
	}
}

// peerSerial is the serial of the client certificate of a connection.
func peerSerial(c *hubConn) string {
	return c.conn.ConnectionState().TLS.PeerCertificates[0].SerialNumber.Text(16)
}

// checkInstalled checks that tls.crt is certPEM, tls.key its key (mode
// 0600), and that no rotation file is left.
func checkInstalled(t *testing.T, dir string, certPEM []byte) {
	t.Helper()
	if got := readFile(t, dir, credstore.CertFile); !bytes.Equal(got, certPEM) {
		t.Errorf("%s is not the expected certificate", credstore.CertFile)
	}
	if _, err := tls.X509KeyPair(readFile(t, dir, credstore.CertFile), readFile(t, dir, credstore.KeyFile)); err != nil {
		t.Errorf("%s and %s do not match: %v", credstore.CertFile, credstore.KeyFile, err)
	}
	if info, err := os.Stat(filepath.Join(dir, credstore.KeyFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v; want 0600", credstore.KeyFile, err, info.Mode().Perm())
	}
	for _, name := range []string{credstore.NextKeyFile, credstore.NextCertFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", name, err)
		}
	}
}

func TestRotationAtEightyPercentOfTheLifetime(t *testing.T) {
	// 100 s of lifetime, 70 s gone: the renewal is due in 10 s.
	s := newRotationSetup(t, -70*time.Second, 30*time.Second, renewed)
	startAgent(t, s.agent)
	first := s.hub.waitConn(t, waitTimeout)
	d := s.clock.waitTimerIn(t, "renewing the certificate", 9*time.Second, 10*time.Second)
	if _, err := os.Stat(filepath.Join(s.dir, credstore.NextKeyFile)); !os.IsNotExist(err) {
		t.Errorf("a new key before the renewal was due (%v)", err)
	}
	s.clock.Step(d)

	req := s.hub.waitFor(t, "a renewal request", waitTimeout, isKind("renewal"))
	if req.conn != first.id {
		t.Errorf("renewal on connection %d, want the session's %d", req.conn, first.id)
	}
	csr, err := parseCSR(req.renewal.CSR)
	if err != nil || csr.Subject.CommonName != protocol.ClusterCommonName(testCluster) {
		t.Fatalf("renewal CSR %v (%v), want one for %s", csr, err, protocol.ClusterCommonName(testCluster))
	}
	next := s.hub.waitNewConn(t, first, "the renewal")
	installed := readFile(t, s.dir, credstore.CertFile)
	leaf, err := parseCertificates(installed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := peerSerial(next), leaf[0].SerialNumber.Text(16); got != want {
		t.Errorf("reconnected with certificate %s, want the renewed %s", got, want)
	}
	if !leaf[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
		t.Error("the installed certificate is not for the key of the request")
	}
	checkInstalled(t, s.dir, installed)
	select {
	case <-first.conn.Context().Done(): // the agent closed it before redialing
	default:
		t.Error("the session with the old certificate is still open")
	}
	for _, want := range []string{`msg="certificate renewed"`, "previousSerial=", `msg="reconnecting with the renewed certificate"`} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("logs lack %q", want)
		}
	}
	// The renewed certificate (an hour) is renewed in turn, at 80 %.
	s.clock.waitTimerIn(t, "renewing the renewed certificate", 45*time.Minute, 49*time.Minute)
}

func TestRotationRetriesFailuresWithoutReplacingAnything(t *testing.T) {
	// Past 80 % already: the renewal starts at once.
	s := newRotationSetup(t, -1000*time.Second, 100*time.Second,
		func(*testing.T, *testPKI, *protocol.CertificateRenewRequest) protocol.Message {
			return &protocol.Error{Code: protocol.CodeUnavailable, Message: "hub busy"}
		},
		renewedAs("cluster:member-2"),
		renewed)
	startAgent(t, s.agent)
	first := s.hub.waitConn(t, waitTimeout)
	for i, backoff := range []time.Duration{time.Minute, 2 * time.Minute} {
		e := s.hub.waitFor(t, "a renewal request", waitTimeout, isKind("renewal"))
		if e.conn != first.id {
			t.Fatalf("renewal %d on connection %d, want the first session %d kept", i+1, e.conn, first.id)
		}
		d := s.clock.waitTimerIn(t, "renewing again", max(backoff*8/10, time.Minute), backoff*12/10)
		if !bytes.Equal(readFile(t, s.dir, credstore.CertFile), s.certPEM) || !bytes.Equal(readFile(t, s.dir, credstore.KeyFile), s.keyPEM) {
			t.Fatalf("after failed renewal %d, %s or %s changed", i+1, credstore.CertFile, credstore.KeyFile)
		}
		s.clock.Step(d)
	}
	s.hub.waitFor(t, "the third renewal request", waitTimeout, isKind("renewal"))
	next := s.hub.waitNewConn(t, first, "the renewal")
	installed := readFile(t, s.dir, credstore.CertFile)
	leaf, err := parseCertificates(installed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := peerSerial(next), leaf[0].SerialNumber.Text(16); got != want {
		t.Errorf("reconnected with certificate %s, want the renewed %s", got, want)
	}
	checkInstalled(t, s.dir, installed)
	for _, want := range []string{`msg="the hub did not renew the certificate"`, `code=Unavailable message="hub busy"`,
		"not acceptable, nothing replaced", `common name is \"cluster:member-2\"`, `msg="certificate renewed"`} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("logs lack %q", want)
		}
	}
}
