package join

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// SignerName is the signer of agent certificates.
	SignerName = v1alpha1.AgentSignerName
	// ClusterLabel on a CertificateSigningRequest names the cluster it is for.
	ClusterLabel = "flotilla.io/cluster"
	// TokenAnnotation is the ID of the bootstrap token the join presented.
	TokenAnnotation = "flotilla.io/bootstrap-token-id"
	// RegistrationAnnotation holds what the hub decided, at the join, to
	// register the Cluster with (JSON Registration). Requests from hubs
	// that took the agent's word (annotation flotilla.io/registration)
	// register nothing.
	RegistrationAnnotation = "flotilla.io/cluster-registration"
	// csrNamePrefix starts the name of every request the hub creates.
	csrNamePrefix = "flotilla-agent-"
)

// checkRequest parses a PEM certificate request and refuses anything but a
// self-signed request for cluster's identity with an acceptable key.
func checkRequest(csrPEM []byte, cluster string) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("want exactly one PEM CERTIFICATE REQUEST block")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse the certificate request: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("the certificate request's signature: %w", err)
	}
	if want := protocol.ClusterCommonName(cluster); req.Subject.CommonName != want {
		return nil, fmt.Errorf("the request is for common name %q, want %q", req.Subject.CommonName, want)
	}
	if s := req.Subject; len(s.Organization)+len(s.OrganizationalUnit)+len(s.Country)+len(s.Locality)+len(s.Province)+len(s.StreetAddress)+len(s.PostalCode) > 0 || s.SerialNumber != "" {
		return nil, fmt.Errorf("the request's subject %q has more than the common name", s.String())
	}
	if len(req.DNSNames)+len(req.EmailAddresses)+len(req.IPAddresses)+len(req.URIs) > 0 {
		return nil, fmt.Errorf("the request asks for subject alternative names; an agent certificate has none")
	}
	if err := pki.CheckPublicKey(req.PublicKey); err != nil {
		return nil, err
	}
	return req, nil
}

// requestName is the CertificateSigningRequest of a join: the same request
// (cluster and key) always has the same name, so an agent that joins again
// while waiting for approval finds its request.
func requestName(cluster string, req *x509.CertificateRequest) string {
	sum := sha256.Sum256(append([]byte(cluster+"\x00"), req.RawSubjectPublicKeyInfo...))
	name := cluster
	if max := 253 - len(csrNamePrefix) - 17; len(name) > max {
		name = name[:max]
	}
	return csrNamePrefix + name + "-" + hex.EncodeToString(sum[:8])
}

// newRequest is the CertificateSigningRequest the hub creates for a join.
func newRequest(j *protocol.JoinRequest, req *x509.CertificateRequest, r Registration, tokenID string, ttlSeconds int32) (*certificatesv1.CertificateSigningRequest, error) {
	reg, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode registration of %s: %w", j.ClusterName, err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name:        requestName(j.ClusterName, req),
			Labels:      map[string]string{ClusterLabel: j.ClusterName},
			Annotations: map[string]string{TokenAnnotation: tokenID, RegistrationAnnotation: string(reg)},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req.Raw}),
			SignerName:        SignerName,
			ExpirationSeconds: &ttlSeconds,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, nil
}
