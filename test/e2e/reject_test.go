package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestHubRejectsBadAgents sends the hub a wrong ALPN, an unknown
// certificate, garbage, oversized and unknown frames and bad hellos; each is
// refused with a clear error while a real agent keeps renewing.
func TestHubRejectsBadAgents(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(1)...)
	h := startHub(t)
	startAgent(t, h, env.Cluster("member-1"))
	waitReady(t, h, "member-1", 30*time.Second)
	rogue := loadClientTLS(t, h.issueCert(t, "rogue"), "127.0.0.1")

	frame := func(length uint32, typ byte, payload string) []byte {
		b := binary.BigEndian.AppendUint32(nil, length)
		return append(append(b, typ), payload...)
	}
	hello := func(cluster string, version int) []byte {
		var buf strings.Builder
		if err := protocol.WriteMessage(&buf, &protocol.Hello{ProtocolVersion: version, ClusterName: cluster, AgentVersion: "evil"}); err != nil {
			t.Fatal(err)
		}
		return []byte(buf.String())
	}
	tests := []struct {
		name string
		tls  *tls.Config
		send []byte // after the control stream kind byte
		want string // in the error the client sees
	}{
		{"garbage bytes", rogue, []byte("GET / HTTP/1.1\r\n\r\n"), "frame too large"},
		{"oversized frame", rogue, frame(2<<20, byte(protocol.TypeHello), "{}"), "frame too large"},
		{"unknown message type", rogue, frame(3, 99, "{}"), "unknown message type"},
		{"bad JSON", rogue, frame(6, byte(protocol.TypeHello), "{nope"), "payload"},
		{"hello for another cluster", rogue, hello("member-1", protocol.Version), protocol.CodeClusterMismatch},
		{"unsupported protocol version", rogue, hello("rogue", 99), protocol.CodeUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := exchange(t, h.quicAddr, tt.tls, tt.send)
			t.Logf("client sees: %v", err)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}

	t.Run("wrong ALPN", func(t *testing.T) {
		wrong := rogue.Clone()
		wrong.NextProtos = []string{"h3"}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, err := quic.DialAddr(ctx, h.quicAddr, wrong, protocol.QUICConfig())
		if err == nil {
			conn.CloseWithError(0, "")
			t.Fatal("dial with ALPN h3 succeeded")
		}
		if !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("error = %v, want it to name the application protocol", err)
		}
	})

	t.Run("certificate from an unknown CA", func(t *testing.T) {
		err := exchange(t, h.quicAddr, unknownCATLS(t, h), hello("member-1", protocol.Version))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("error = %v, want a certificate error", err)
		}
	})

	t.Run("the real agent kept renewing", func(t *testing.T) {
		before := h.lease(t, "member-1").Spec.RenewTime.Time
		waitFor(t, 10*time.Second, "a renewal after the attacks", func() (bool, string) {
			l := h.lease(t, "member-1")
			return l.Spec.RenewTime.After(before), l.Spec.RenewTime.String()
		})
		if got := readyOf(h.cluster(t, "member-1")); got != metav1.ConditionTrue {
			t.Errorf("member-1 Ready = %s, want True", got)
		}
		if h.cluster(t, "rogue") != nil && readyOf(h.cluster(t, "rogue")) == metav1.ConditionTrue {
			t.Error("a rogue client that never completed hello became a Ready cluster")
		}
	})
}

// exchange dials the hub, opens a control stream, writes payload and
// returns the first error the client sees: a hub Error message, the
// connection's close reason, or a read failure.
func exchange(t *testing.T, addr string, tlsConf *tls.Config, payload []byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, tlsConf, protocol.QUICConfig())
	if err != nil {
		return err
	}
	defer conn.CloseWithError(0, "test done")
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	if err := protocol.WriteStreamKind(stream, protocol.StreamControl); err != nil {
		return err
	}
	if _, err := stream.Write(payload); err != nil {
		return err
	}
	msg, err := protocol.NewReader(stream, 0).ReadMessage()
	if err != nil {
		return err
	}
	var peerErr *protocol.Error
	if m, ok := msg.(*protocol.Error); ok {
		peerErr = m
		return peerErr
	}
	return errors.New("hub answered " + msg.Type().String())
}

func loadClientTLS(t *testing.T, certDir, serverName string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	return protocol.ClientTLSConfig(cert, roots, serverName)
}

// unknownCATLS trusts the hub but presents a certificate signed by another CA.
func unknownCATLS(t *testing.T, h *hub) *tls.Config {
	t.Helper()
	other, err := pki.NewCA("other-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := other.Issue(pki.Request{CommonName: protocol.ClusterCommonName("member-1"), Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := kp.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadClientTLS(t, h.issueCert(t, "scratch"), "127.0.0.1")
	cfg.Certificates = []tls.Certificate{cert}
	return cfg
}
