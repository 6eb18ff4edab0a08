package protocol

// Certificate renewal: on its session connection, an agent opens a
// [StreamRenew] stream, sends one CertificateRenewRequest and reads one
// answer, CertificateRenewResponse or Error; then the stream ends. The
// session's client certificate is the proof of identity: a renewal is for
// the session's own cluster only.

// Error codes of a refused renewal (besides CodeCSRRefused and
// CodeCSRDenied). The message says what to do.
const (
	// CodeRateLimited: a renewal is already in flight on this session, or
	// the cluster renewed too recently; try again later.
	CodeRateLimited = "RateLimited"
	// CodeUnavailable: the hub could not answer now (not signed in time,
	// store unreachable); try again later.
	CodeUnavailable = "Unavailable"
)

// MaxRenewFrame is the frame limit of both sides of a renewal stream.
const MaxRenewFrame = MaxJoinFrame

// CertificateRenewRequest asks for a new certificate of the session's
// cluster for a new key.
type CertificateRenewRequest struct {
	// CSR is a PEM CERTIFICATE REQUEST for CommonName cluster:<name>, signed
	// by the agent's new key.
	CSR []byte `json:"csr"`
	// AcceptsAgentCA: as in JoinRequest.
	AcceptsAgentCA bool `json:"acceptsAgentCA,omitempty"`
}

// CertificateRenewResponse answers a CertificateRenewRequest.
type CertificateRenewResponse struct {
	// Certificate is the new client certificate, PEM.
	Certificate []byte `json:"certificate"`
	// CACertificate is the hub CA, PEM.
	CACertificate []byte `json:"caCertificate"`
}

// Type implements Message.
func (*CertificateRenewRequest) Type() MessageType { return TypeCertificateRenewRequest }

// Type implements Message.
func (*CertificateRenewResponse) Type() MessageType { return TypeCertificateRenewResponse }

// Validate bounds a CertificateRenewRequest; the hub checks its content.
func (r *CertificateRenewRequest) Validate() error {
	return invalid(TypeCertificateRenewRequest, requiredBytes("csr", r.CSR, maxCSRBytes))
}

// Validate requires a certificate and the CA.
func (r *CertificateRenewResponse) Validate() error {
	return invalid(TypeCertificateRenewResponse,
		requiredBytes("certificate", r.Certificate, maxCertBytes),
		requiredBytes("caCertificate", r.CACertificate, maxCertBytes),
	)
}
