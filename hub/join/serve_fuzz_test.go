package join

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// FuzzReadRequest feeds a join stream's bytes, as an unauthenticated
// peer sends them, through what the hub does before it asks the API
// server anything: the request is read and bounded, its token's ID taken,
// its certificate request checked and named.
func FuzzReadRequest(f *testing.F) {
	key, err := pki.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: protocol.ClusterCommonName("edge-1")}}, key)
	if err != nil {
		f.Fatal(err)
	}
	csr := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	for _, req := range []*protocol.JoinRequest{
		{ProtocolVersion: protocol.Version, ClusterName: "edge-1", BootstrapToken: "abcdef.0123456789abcdef", CSR: csr, AgentVersion: "fuzz",
			Region: "eu-1", Labels: map[string]string{"site": "store-7"}},
		{ProtocolVersion: protocol.Version, ClusterName: "edge-1", BootstrapToken: "ABCDEF.0123456789abcdef", CSR: append(csr, csr...), AgentVersion: "fuzz"},
		{ProtocolVersion: protocol.Version, ClusterName: strings.Repeat("a", 63), BootstrapToken: "abcdef.", CSR: []byte("-----BEGIN CERTIFICATE REQUEST-----\n"), AgentVersion: "fuzz"},
	} {
		var buf bytes.Buffer
		if err := protocol.WriteStreamKind(&buf, protocol.StreamJoin); err != nil {
			f.Fatal(err)
		}
		if err := protocol.WriteMessage(&buf, req); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte{})
	f.Add([]byte("\x01\xff\xff\xff\xff"))

	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := readRequest(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(data) > protocol.MaxJoinFrame+64 && len(req.CSR) > protocol.MaxJoinFrame {
			t.Fatalf("a request of %d bytes was read past the join frame limit", len(req.CSR))
		}
		if id := bootstraptoken.IDOf(req.BootstrapToken); id != "" && !strings.HasPrefix(req.BootstrapToken, id+".") {
			t.Fatalf("token %q gave ID %q", req.BootstrapToken, id)
		}
		x509req, err := checkRequest(req.CSR, req.ClusterName)
		if err != nil {
			return
		}
		if x509req.Subject.CommonName != protocol.ClusterCommonName(req.ClusterName) {
			t.Fatalf("accepted a request for %q as cluster %q", x509req.Subject.CommonName, req.ClusterName)
		}
		if name := requestName(req.ClusterName, x509req); len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("request name %q is not a valid object name: %v", name, validation.IsDNS1123Subdomain(name))
		}
	})
}
