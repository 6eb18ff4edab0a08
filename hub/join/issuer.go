package join

import (
	"sync/atomic"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/flotilla-io/flotilla/internal/pki"
)

const (
	// IssuerAnnotation on a request the hub created for an agent from
	// before the agent CA (its join or renewal did not say AcceptsAgentCA)
	// is IssuerHubCA: its certificate is signed by the hub CA, as that
	// agent checks it, so that upgrading the hub first breaks no agent.
	// Only the hub writes requests' annotations (admission).
	IssuerAnnotation = "flotilla.io/issuer"
	IssuerHubCA      = "hub-ca"
)

// markIssuer notes on csr which CA signs it: none for the agent CA.
func markIssuer(csr *certificatesv1.CertificateSigningRequest, acceptsAgentCA bool) *certificatesv1.CertificateSigningRequest {
	if !acceptsAgentCA {
		csr.Annotations[IssuerAnnotation] = IssuerHubCA
	}
	return csr
}

// issuer is the CA that signs csr, and whether the agent CA is sent after
// the certificate (an agent that takes it checks the certificate with it).
func (c *Controller) issuer(csr *certificatesv1.CertificateSigningRequest) (ca *pki.CA, chain bool) {
	if csr.Annotations[IssuerAnnotation] == IssuerHubCA {
		return c.cfg.CA, false
	}
	return c.cfg.AgentCA, true
}

// SignerCounts are what the signer refused or allowed for compatibility.
type SignerCounts struct {
	// NotCreatedByHub requests were failed: someone else created them.
	NotCreatedByHub int64
	// HubCAIssued certificates were signed by the hub CA for agents from
	// before the agent CA.
	HubCAIssued int64
	// MetadataIgnored joins asked for provider, region, zone or labels
	// that only the token or an operator sets.
	MetadataIgnored int64
}

type signerCounts struct{ notCreatedByHub, hubCAIssued, metadataIgnored atomic.Int64 }

// SignerCounts returns the signer's counts so far.
func (c *Controller) SignerCounts() SignerCounts {
	return SignerCounts{NotCreatedByHub: c.counts.notCreatedByHub.Load(), HubCAIssued: c.counts.hubCAIssued.Load(), MetadataIgnored: c.counts.metadataIgnored.Load()}
}
