package protocol

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// JoinALPN is the application protocol of a join connection: an agent
// without a certificate yet, which trusts the hub by its CA pin alone,
// presents a bootstrap token and a certificate request, and leaves with a
// certificate (or a refusal). A join connection carries one stream
// ([StreamJoin]) with one JoinRequest and one answer, JoinResponse or
// Error, and nothing else: it can never become a session.
const JoinALPN = "flotilla-join/1"

// Error codes of a refused join. The message says what to do.
const (
	// CodeTokenRefused: the bootstrap token is malformed, unknown,
	// deleted, expired, not meant for joining, or bound to another cluster.
	CodeTokenRefused = "TokenRefused"
	// CodeCSRRefused: the certificate request is malformed or asks for
	// something other than the cluster's client identity.
	CodeCSRRefused = "CSRRefused"
	// CodeCSRDenied: the hub's CertificateSigningRequest was denied.
	CodeCSRDenied = "CSRDenied"
)

// Bounds of a join: a P-256 or RSA-4096 request fits easily.
const (
	maxCSRBytes       = 16 << 10
	maxCertBytes      = 32 << 10
	maxJoinLabels     = 64
	bootstrapTokenLen = 23 // [a-z0-9]{6}.[a-z0-9]{16}
	// MaxJoinFrame is the frame limit of both sides of a join stream.
	MaxJoinFrame = 96 << 10
)

// AgentLabelPrefix starts the only Cluster labels an agent may set, as
// Kubernetes' NodeRestriction lets a kubelet set only its own prefixes:
// a selector on such a label trusts what the member cluster says of
// itself, and nothing else does.
const AgentLabelPrefix = "agent.flotilla.io/"

// MaxAgentLabels bounds the labels under AgentLabelPrefix the hub puts on
// an agent's Cluster; it ignores more.
const MaxAgentLabels = 16

// IsAgentLabel reports whether key is a label an agent may set.
func IsAgentLabel(key string) bool { return strings.HasPrefix(key, AgentLabelPrefix) }

// JoinRequest asks for the client certificate of ClusterName.
type JoinRequest struct {
	ProtocolVersion int    `json:"protocolVersion"`
	ClusterName     string `json:"clusterName"`
	// BootstrapToken is the token from `flotilla token create`.
	BootstrapToken string `json:"bootstrapToken"`
	// CSR is a PEM CERTIFICATE REQUEST for CommonName cluster:<name>,
	// signed by the agent's own key (which never leaves the agent).
	CSR          []byte `json:"csr"`
	AgentVersion string `json:"agentVersion"`
	// Provider, Region, Zone and Labels are what the agent would like on
	// its Cluster. The hub takes only Labels under AgentLabelPrefix: the
	// rest come from the token or the hub's operator, and are ignored
	// here (an event on the Cluster lists them).
	Provider string            `json:"provider,omitempty"`
	Region   string            `json:"region,omitempty"`
	Zone     string            `json:"zone,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// AcceptsAgentCA: the agent takes a certificate of the hub's agent CA,
	// sent after the certificate. Agents from before the agent CA do not
	// say so, and get one of the hub CA, as they did.
	AcceptsAgentCA bool `json:"acceptsAgentCA,omitempty"`
}

// JoinResponse answers a JoinRequest.
type JoinResponse struct {
	// Certificate is the signed client certificate, PEM; empty while the
	// request waits for approval (Pending).
	Certificate []byte `json:"certificate,omitempty"`
	// CACertificate is the hub CA, PEM: from now on the agent verifies the
	// hub with it.
	CACertificate []byte `json:"caCertificate"`
	// Pending: the request waits for an operator's approval; join again
	// later with the same key. Message says how to approve it.
	Pending bool   `json:"pending,omitempty"`
	Message string `json:"message,omitempty"`
}

// Type implements Message.
func (*JoinRequest) Type() MessageType { return TypeJoinRequest }

// Type implements Message.
func (*JoinResponse) Type() MessageType { return TypeJoinResponse }

// Validate bounds a JoinRequest; the hub checks the token and the request's
// content itself.
func (j *JoinRequest) Validate() error {
	return invalid(TypeJoinRequest,
		positive("protocolVersion", j.ProtocolVersion),
		clusterName("clusterName", j.ClusterName),
		required("bootstrapToken", j.BootstrapToken),
		maxLen("bootstrapToken", j.BootstrapToken, bootstrapTokenLen),
		requiredBytes("csr", j.CSR, maxCSRBytes),
		maxLen("agentVersion", j.AgentVersion, maxShortString),
		maxLen("provider", j.Provider, maxShortString),
		maxLen("region", j.Region, maxShortString),
		maxLen("zone", j.Zone, maxShortString),
		joinLabels(j.Labels),
	)
}

// Validate requires a CA, and a certificate unless the request is pending.
func (j *JoinResponse) Validate() error {
	var cert error
	if !j.Pending {
		cert = requiredBytes("certificate", j.Certificate, maxCertBytes)
	} else if len(j.Certificate) > 0 {
		cert = fmt.Errorf("certificate: must be empty while pending")
	}
	return invalid(TypeJoinResponse,
		cert,
		requiredBytes("caCertificate", j.CACertificate, maxCertBytes),
		maxLen("message", j.Message, maxLongString),
	)
}

func requiredBytes(field string, b []byte, limit int) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("%s is required", field)
	case len(b) > limit:
		return fmt.Errorf("%s is %d bytes, limit %d", field, len(b), limit)
	}
	return nil
}

// joinLabels wants Kubernetes label keys and values, at most maxJoinLabels.
func joinLabels(labels map[string]string) error {
	if len(labels) > maxJoinLabels {
		return fmt.Errorf("labels has %d entries, limit %d", len(labels), maxJoinLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("labels: key %q: %v", truncate(k), errs)
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("labels[%s]: value %q: %v", k, truncate(labels[k]), errs)
		}
	}
	return nil
}
