package agent

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/syncbuf"
	"github.com/flotilla-io/flotilla/protocol"
)

const testToken = "abcdef.0123456789abcdef"

// sign issues a certificate for the key of req's CSR with commonName (the
// CSR's own if empty) and usage, as the hub's signer would.
func (p *testPKI) sign(req *protocol.JoinRequest, commonName string, usage x509.ExtKeyUsage) ([]byte, error) {
	csr, err := parseCSR(req.CSR)
	if err != nil {
		return nil, err
	}
	if commonName == "" {
		commonName = csr.Subject.CommonName
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}, p.ca.Cert, csr.PublicKey, p.ca.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM CERTIFICATE REQUEST")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	return csr, csr.CheckSignature()
}

// Answers of the test hub that are not messages.
var (
	resetStream = &protocol.Error{Code: "test: reset the stream"}
	stayQuiet   = &protocol.Error{Code: "test: answer nothing"}
)

// serveJoin answers one join stream as h.join says.
func (h *testHub) serveJoin(c *hubConn, str *quic.Stream) {
	m, err := protocol.NewReader(str, protocol.MaxJoinFrame).ReadMessage()
	req, ok := m.(*protocol.JoinRequest)
	if err != nil || !ok || h.join == nil {
		c.conn.CloseWithError(protocol.CloseProtocolError, "want a JoinRequest")
		return
	}
	h.record(hubEvent{kind: "join", conn: c.id, join: req})
	switch answer := h.join(int(h.joins.Add(1)), req); answer {
	case resetStream:
		str.CancelRead(7)
		str.CancelWrite(7)
	case stayQuiet:
		select {
		case <-c.conn.Context().Done():
		case <-h.ctx.Done():
		}
	default:
		if protocol.WriteMessage(str, answer) == nil {
			str.Close()
		}
	}
}

// joinAnswer is the test hub's answer to a join request; own is the hub's
// PKI, other one the agent does not pin.
type joinAnswer func(t *testing.T, own, other *testPKI, req *protocol.JoinRequest) protocol.Message

func issued(t *testing.T, own, _ *testPKI, req *protocol.JoinRequest) protocol.Message {
	return issuedBy(own, "", x509.ExtKeyUsageClientAuth, own)(t, nil, nil, req)
}

// issuedBy signs with signer and sends ca as the hub's CA.
func issuedBy(signer *testPKI, commonName string, usage x509.ExtKeyUsage, ca *testPKI) joinAnswer {
	return func(t *testing.T, _, _ *testPKI, req *protocol.JoinRequest) protocol.Message {
		cert, err := signer.sign(req, commonName, usage)
		if err != nil {
			t.Errorf("test hub: sign: %v", err)
			return &protocol.Error{Code: protocol.CodeCSRRefused, Message: err.Error()}
		}
		return &protocol.JoinResponse{Certificate: cert, CACertificate: ca.ca.CertPEM()}
	}
}

const approveMessage = "waiting for approval: kubectl certificate approve flotilla-member-1-x7k2p"

func pending(_ *testing.T, own, _ *testPKI, _ *protocol.JoinRequest) protocol.Message {
	return &protocol.JoinResponse{Pending: true, CACertificate: own.ca.CertPEM(), Message: approveMessage}
}

func answer(m protocol.Message) joinAnswer {
	return func(*testing.T, *testPKI, *testPKI, *protocol.JoinRequest) protocol.Message { return m }
}

// timerClock is a fake clock that reports every timer made on it, so a
// test knows when the agent waits and for how long.
type timerClock struct {
	*clocktesting.FakeClock
	timers chan time.Duration
}

func newTimerClock() *timerClock {
	return &timerClock{FakeClock: clocktesting.NewFakeClock(time.Now()), timers: make(chan time.Duration, 64)}
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	timer := c.FakeClock.NewTimer(d)
	select {
	case c.timers <- d:
	default:
	}
	return timer
}

// waitTimer returns the duration of the next timer the agent makes.
func (c *timerClock) waitTimer(t *testing.T, what string) time.Duration {
	t.Helper()
	select {
	case d := <-c.timers:
		return d
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %v waiting for the agent to wait before %s", waitTimeout, what)
		return 0
	}
}

// joinSetup is a test hub that answers joins and an agent without a
// certificate that joins it.
type joinSetup struct {
	own, other *testPKI
	hub        *testHub
	clock      *timerClock
	logs       *syncbuf.Buffer
	certDir    string
	cfg        Config
}

func newJoinSetup(t *testing.T, answers []joinAnswer) *joinSetup {
	t.Helper()
	s := &joinSetup{own: newTestPKI(t), other: newTestPKI(t), clock: newTimerClock(), logs: &syncbuf.Buffer{}}
	s.hub = startTestHub(t, s.own.hubTLS(t), nil, func(h *testHub) {
		h.join = func(n int, req *protocol.JoinRequest) protocol.Message {
			return answers[min(n, len(answers))-1](t, s.own, s.other, req)
		}
	})
	s.certDir = filepath.Join(t.TempDir(), "certs") // missing: the agent makes it
	s.cfg = Config{Hub: s.hub.addr(), ClusterName: testCluster, CertDir: s.certDir,
		BootstrapToken: testToken, HubCAHash: pki.Pin(s.own.ca.Cert),
		Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Labels: map[string]string{"site": "store-7", "example.com/tier": "edge"},
		StatusInterval: 300 * time.Millisecond, Version: "test", Clock: s.clock,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(s.logs, t.Output()), nil))}
	return s
}

// agent returns the agent as New makes it from s.cfg, on a fake cluster.
func (s *joinSetup) agent(t *testing.T) *Agent {
	t.Helper()
	if err := s.cfg.withDefaults().validate(); err != nil {
		t.Fatal(err)
	}
	return newFakeAgent(t, s.cfg, nil, fakeCluster(1), healthy)
}

// joinBackoff is the base of the retry delay after the nth failed attempt,
// from 0.
func joinBackoff(n int) time.Duration {
	return min(joinBackoffInitial<<n, joinBackoffMax)
}

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []joinAnswer // one per attempt; the agent makes exactly these
		// change adjusts the setup before the agent starts.
		change  func(s *joinSetup, a *Agent)
		wantErr []string // Run's error; none means the agent joins
		wantLog []string
	}{
		{name: "issued", answers: []joinAnswer{issued}, wantLog: []string{"msg=joined"}},
		{name: "pending, then issued", answers: []joinAnswer{pending, pending, issued},
			wantLog: []string{"msg=\"join waits for approval\"", approveMessage, "msg=joined"}},
		{name: "stream reset, then issued", answers: []joinAnswer{answer(resetStream), issued},
			wantLog: []string{"msg=\"cannot join the hub\""}},
		{name: "no answer in time, then issued", answers: []joinAnswer{answer(stayQuiet), issued},
			change:  func(_ *joinSetup, a *Agent) { a.joinTimeout = 300 * time.Millisecond },
			wantLog: []string{"no answer from the hub within 300ms"}},
		{name: "another error, then issued",
			answers: []joinAnswer{answer(&protocol.Error{Code: protocol.CodeBadMessage, Message: "hub busy"}), issued},
			wantLog: []string{"msg=\"the hub could not take the join request\"", "code=BadMessage"}},
		{name: "token refused",
			answers: []joinAnswer{answer(&protocol.Error{Code: protocol.CodeTokenRefused, Message: "bootstrap token abcdef expired at 2030-01-01T00:00:00Z: create a new one"})},
			wantErr: []string{`the hub refused to let cluster "member-1" join`, "TokenRefused", "bootstrap token abcdef expired at 2030-01-01T00:00:00Z: create a new one"}},
		{name: "CSR refused",
			answers: []joinAnswer{answer(&protocol.Error{Code: protocol.CodeCSRRefused, Message: "the request asks for more than CN=cluster:member-1"})},
			wantErr: []string{"CSRRefused", "the request asks for more than CN=cluster:member-1"}},
		{name: "CSR denied after pending",
			answers: []joinAnswer{pending, answer(&protocol.Error{Code: protocol.CodeCSRDenied, Message: "denied by admin: not our site"})},
			wantErr: []string{"CSRDenied", "denied by admin: not our site"}},
		{name: "wrong pin", change: func(s *joinSetup, a *Agent) { a.cfg.HubCAHash = pki.Pin(s.other.ca.Cert) },
			wantErr: []string{"does not present the CA that --hub-ca-hash", "no certificate the hub presented has the CA pin"}},
		{name: "certificate for another key",
			answers: []joinAnswer{func(t *testing.T, own, _ *testPKI, _ *protocol.JoinRequest) protocol.Message {
				kp := own.issue(t, pki.Request{CommonName: protocol.ClusterCommonName(testCluster), Usage: pki.ClientAuth})
				return &protocol.JoinResponse{Certificate: kp.CertPEM, CACertificate: own.ca.CertPEM()}
			}},
			wantErr: []string{"not acceptable, nothing written", "the certificate is for another key than tls.key"}},
		{name: "certificate for another cluster",
			answers: []joinAnswer{func(t *testing.T, own, _ *testPKI, req *protocol.JoinRequest) protocol.Message {
				return issuedBy(own, "cluster:member-2", x509.ExtKeyUsageClientAuth, own)(t, nil, nil, req)
			}},
			wantErr: []string{`common name is "cluster:member-2", but cluster "member-1" needs "cluster:member-1"`}},
		{name: "serving certificate",
			answers: []joinAnswer{func(t *testing.T, own, _ *testPKI, req *protocol.JoinRequest) protocol.Message {
				return issuedBy(own, "", x509.ExtKeyUsageServerAuth, own)(t, nil, nil, req)
			}},
			wantErr: []string{"not a client certificate of the pinned CA"}},
		{name: "another CA",
			answers: []joinAnswer{func(t *testing.T, _, other *testPKI, req *protocol.JoinRequest) protocol.Message {
				return issuedBy(other, "", x509.ExtKeyUsageClientAuth, other)(t, nil, nil, req)
			}},
			wantErr: []string{"the CA certificate the hub sent is not the one --hub-ca-hash"}},
		{name: "signed by another CA",
			answers: []joinAnswer{func(t *testing.T, own, other *testPKI, req *protocol.JoinRequest) protocol.Message {
				return issuedBy(other, "", x509.ExtKeyUsageClientAuth, own)(t, nil, nil, req)
			}},
			wantErr: []string{"not a client certificate of the pinned CA", "unknown authority"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newJoinSetup(t, tc.answers)
			a := s.agent(t)
			if tc.change != nil {
				tc.change(s, a)
			}
			run := startAgent(t, a)

			var requests []*protocol.JoinRequest
			for i := range tc.answers {
				requests = append(requests, s.hub.waitFor(t, "a join request", waitTimeout, isKind("join")).join)
				if i == len(tc.answers)-1 {
					break
				}
				d := s.clock.waitTimer(t, "joining again")
				if base := joinBackoff(i); d < base*8/10 || d > min(base*12/10, joinBackoffMax) {
					t.Errorf("retry %d after %v, want %v ± 20%% (at most %v)", i+1, d, base, joinBackoffMax)
				}
				s.clock.Step(d)
			}

			if len(tc.wantErr) > 0 {
				err := run.wait(t)
				if err == nil {
					t.Fatal("Run = nil, want an error")
				}
				t.Logf("Run: %v", err)
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Run = %q, want it to contain %q", err, want)
					}
				}
				checkFiles(t, s.certDir, credstore.KeyFile)
			} else {
				hello := s.hub.waitFor(t, "the session's Hello", waitTimeout, isKind("hello"))
				if hello.peer != testCluster {
					t.Errorf("the session's certificate proves cluster %q, want %q", hello.peer, testCluster)
				}
				checkFiles(t, s.certDir, credstore.CAFile, credstore.CertFile, credstore.KeyFile)
				if got, want := readFile(t, s.certDir, credstore.CAFile), s.own.ca.CertPEM(); !bytes.Equal(got, want) {
					t.Errorf("ca.crt =\n%s\nwant the hub's CA\n%s", got, want)
				}
				run.cancel()
				if err := run.wait(t); err != nil {
					t.Errorf("Run = %v", err)
				}
			}
			if len(requests) > 0 {
				checkJoinRequests(t, s, requests)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(s.logs.String(), want) {
					t.Errorf("the agent's log does not contain %q", want)
				}
			}
			if strings.Contains(s.logs.String(), testToken[7:]) {
				t.Error("the agent logged the token's secret")
			}
		})
	}
}

// checkJoinRequests checks what the agent asked for: its cluster, token,
// metadata and a CSR for the key in tls.key with CN=cluster:member-1 and
// nothing else, the same in every attempt.
func checkJoinRequests(t *testing.T, s *joinSetup, requests []*protocol.JoinRequest) {
	t.Helper()
	key, err := parseKey(readFile(t, s.certDir, credstore.KeyFile))
	if err != nil {
		t.Fatalf("tls.key: %v", err)
	}
	for i, req := range requests {
		want := &protocol.JoinRequest{ProtocolVersion: protocol.Version, ClusterName: testCluster,
			BootstrapToken: testToken, CSR: req.CSR, AgentVersion: "test",
			Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a", Labels: map[string]string{"site": "store-7", "example.com/tier": "edge"}, AcceptsAgentCA: true}
		if diff := cmp.Diff(want, req); diff != "" {
			t.Errorf("join request %d (-want +got):\n%s", i+1, diff)
		}
		csr, err := parseCSR(req.CSR)
		if err != nil {
			t.Fatalf("join request %d: CSR: %v", i+1, err)
		}
		type csrFacts struct {
			Subject    string
			Extensions int
			SameKey    bool
		}
		got := csrFacts{csr.Subject.String(), len(csr.Extensions), key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey)}
		if diff := cmp.Diff(csrFacts{"CN=cluster:member-1", 0, true}, got); diff != "" {
			t.Errorf("join request %d: CSR (-want +got):\n%s", i+1, diff)
		}
	}
}

// checkFiles checks that dir (mode 0700) holds exactly the named files,
// each mode 0600.
func checkFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("certificate directory: %v, mode %v; want mode 0700", err, info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]os.FileMode{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = info.Mode()
	}
	want := map[string]os.FileMode{}
	for _, name := range names {
		want[name] = 0o600
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files in the certificate directory (-want +got):\n%s", diff)
	}
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A join that waits for approval leaves tls.key behind; the next start
// joins with that key, and keeps it.
func TestJoinReusesTheKeyOfAnEarlierJoin(t *testing.T) {
	s := newJoinSetup(t, []joinAnswer{issued})
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(s.certDir, credstore.KeyFile), keyPEM)
	startAgent(t, s.agent(t))

	req := s.hub.waitFor(t, "a join request", waitTimeout, isKind("join")).join
	s.hub.waitFor(t, "the session's Hello", waitTimeout, isKind("hello"))
	csr, err := parseCSR(req.CSR)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(csr.PublicKey) {
		t.Error("the CSR is not for the key in tls.key")
	}
	if got := readFile(t, s.certDir, credstore.KeyFile); !bytes.Equal(got, keyPEM) {
		t.Error("tls.key was replaced")
	}
	checkFiles(t, s.certDir, credstore.CAFile, credstore.CertFile, credstore.KeyFile)
}

// An agent stopped while its request waits for approval stops cleanly,
// with only its key written.
func TestJoinStopsWhilePending(t *testing.T) {
	s := newJoinSetup(t, []joinAnswer{pending})
	run := startAgent(t, s.agent(t))
	s.hub.waitFor(t, "a join request", waitTimeout, isKind("join"))
	s.clock.waitTimer(t, "joining again")
	run.cancel()
	if err := run.wait(t); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	checkFiles(t, s.certDir, credstore.KeyFile)
}

func TestNewDecidesWhetherToJoin(t *testing.T) {
	p := newTestPKI(t)
	pin := pki.Pin(p.ca.Cert)
	for _, tc := range []struct {
		name     string
		change   func(t *testing.T, cfg *Config)
		wantJoin bool
		wantErr  []string
	}{
		{name: "certificates, no token", change: func(*testing.T, *Config) {}},
		{name: "certificates and a token: the certificates win", change: func(_ *testing.T, cfg *Config) {
			cfg.BootstrapToken, cfg.HubCAHash = testToken, pin
		}},
		{name: "no certificates, a token", wantJoin: true, change: func(_ *testing.T, cfg *Config) {
			cfg.CertDir = filepath.Join(t.TempDir(), "new")
			cfg.BootstrapToken, cfg.HubCAHash = testToken, pin
		}},
		{name: "only a key, a token", wantJoin: true, change: func(t *testing.T, cfg *Config) {
			remove(t, cfg.CertDir, credstore.CAFile)
			remove(t, cfg.CertDir, credstore.CertFile)
			cfg.BootstrapToken, cfg.HubCAHash = testToken, pin
		}},
		{name: "no certificates, no token", change: func(_ *testing.T, cfg *Config) { cfg.CertDir = t.TempDir() },
			wantErr: []string{"read hub CA", "no such file", "or give --bootstrap-token and --hub-ca-hash to join"}},
		{name: "a token without the CA hash", change: func(_ *testing.T, cfg *Config) { cfg.BootstrapToken = testToken },
			wantErr: []string{"a bootstrap token needs the hub CA hash"}},
		{name: "a malformed token", change: func(_ *testing.T, cfg *Config) { cfg.BootstrapToken, cfg.HubCAHash = "abcdef:secret", pin },
			wantErr: []string{"bootstrap token: not a bootstrap token (13 characters)"}},
		{name: "a malformed CA hash", change: func(_ *testing.T, cfg *Config) { cfg.BootstrapToken, cfg.HubCAHash = testToken, "sha256:abc" },
			wantErr: []string{`hub CA hash: CA pin "sha256:abc"`}},
		{name: "bad metadata", change: func(_ *testing.T, cfg *Config) {
			cfg.Zone, cfg.Labels = "eu west", map[string]string{"-site": "x"}
		}, wantErr: []string{`cluster zone "eu west" is not a label value`, `cluster labels: key "-site" is not a label key`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig(t, p)
			tc.change(t, &cfg)
			a, err := New(cfg)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("New succeeded, want an error")
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("New = %q, want it to contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if joins := a.tls == nil; joins != tc.wantJoin {
				t.Errorf("joins = %v, want %v", joins, tc.wantJoin)
			}
		})
	}
}

func TestParseLabels(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "site=store-7", want: map[string]string{"site": "store-7"}},
		{in: "site=store-7,example.com/tier=edge,empty=", want: map[string]string{"site": "store-7", "example.com/tier": "edge", "empty": ""}},
		{in: "site", wantErr: `"site": want key=value`},
		{in: "a=1,,b=2", wantErr: `"": want key=value`},
		{in: "a=1,a=2", wantErr: `key "a" given twice`},
		{in: "Bad Key=1", wantErr: `key "Bad Key" is not a label key`},
		{in: "site=store 7", wantErr: `value "store 7" of site is not a label value`},
		{in: "site=" + strings.Repeat("x", 64), wantErr: "is not a label value"},
	} {
		got, err := ParseLabels(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseLabels(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLabels(%q): %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseLabels(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	var many []string
	for i := range maxClusterLabels + 1 {
		many = append(many, fmt.Sprintf("k%d=v", i))
	}
	if _, err := ParseLabels(strings.Join(many, ",")); err == nil || !strings.Contains(err.Error(), "65 labels, at most 64") {
		t.Errorf("ParseLabels(65 labels) = %v", err)
	}
}
