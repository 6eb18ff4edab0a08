package join

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// FuzzCheckRequest: the decoder of the certificate requests agents send
// (joins and renewals) never panics, and accepts only a single PEM
// CERTIFICATE REQUEST block, self-signed, for exactly cluster's common name.
func FuzzCheckRequest(f *testing.F) {
	valid := csrPEM(f, pkix.Name{CommonName: protocol.ClusterCommonName("edge-1")})
	block, _ := pem.Decode(valid)
	f.Add(valid, "edge-1")
	f.Add(valid, "edge-2")
	f.Add(csrPEM(f, pkix.Name{CommonName: "cluster:edge-1", Organization: []string{"system:masters"}}), "edge-1")
	f.Add(append(append([]byte{}, valid...), valid...), "edge-1")                                              // two blocks
	f.Add(append(append([]byte{}, valid...), "junk"...), "edge-1")                                             // trailing bytes
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}), "edge-1")                   // wrong type
	f.Add(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes[:len(block.Bytes)/2]}), "edge-1") // truncated
	flipped := bytes.Clone(block.Bytes)
	flipped[len(flipped)-5] ^= 0xff // the signature
	f.Add(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: flipped}), "edge-1")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, data []byte, cluster string) {
		req, err := checkRequest(data, cluster)
		if err != nil {
			if req != nil {
				t.Fatalf("an error (%v) with a request", err)
			}
			return
		}
		block, rest := pem.Decode(data)
		if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) > 0 {
			t.Fatalf("accepted %q: not a single CERTIFICATE REQUEST block", data)
		}
		if want := protocol.ClusterCommonName(cluster); req.Subject.CommonName != want {
			t.Fatalf("accepted common name %q for cluster %q", req.Subject.CommonName, cluster)
		}
		if err := req.CheckSignature(); err != nil {
			t.Fatalf("accepted a request with a bad signature: %v", err)
		}
	})
}

// csrPEM is a PEM certificate request of a fresh key for subject.
func csrPEM(tb testing.TB, subject pkix.Name) []byte {
	tb.Helper()
	key, err := pki.NewKey()
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
