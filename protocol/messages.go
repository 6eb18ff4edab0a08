package protocol

import (
	"fmt"
	"time"
)

// Message is any message that can travel in a frame. It is implemented by the
// pointer types of the message structs in this package.
type Message interface {
	Type() MessageType
}

// Hello is the agent's first message on the control stream.
type Hello struct {
	// ProtocolVersion is the highest version the agent speaks.
	ProtocolVersion int `json:"protocolVersion"`
	// ClusterName must match the cluster named by the agent's certificate.
	ClusterName  string `json:"clusterName"`
	AgentVersion string `json:"agentVersion"`
	// LeaseDurationSeconds is the lease the agent would like; 0 lets the hub
	// choose.
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds"`
}

// Welcome is the hub's answer to Hello. The agent counts as connected only
// once it has received Welcome: with TLS 1.3 a rejected client certificate
// is only noticed after the dial has returned.
type Welcome struct {
	ProtocolVersion int       `json:"protocolVersion"`
	HubID           string    `json:"hubID"`
	HubTime         time.Time `json:"hubTime"`
	// LeaseDurationSeconds is the lease the hub grants.
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds"`
	// RenewIntervalMillis is how often the agent must send LeaseRenew.
	RenewIntervalMillis int64 `json:"renewIntervalMillis"`
}

// LeaseRenew is sent by the agent to keep its lease.
type LeaseRenew struct {
	Seq       uint64    `json:"seq"`
	AgentTime time.Time `json:"agentTime"`
}

// LeaseAck answers LeaseRenew with the same Seq.
type LeaseAck struct {
	Seq uint64 `json:"seq"`
	// HubTime is the hub's clock when it stamped the renewal, so the agent
	// can estimate clock skew and round-trip time.
	HubTime time.Time `json:"hubTime"`
}

// ClusterStatus is the agent's periodic report about its member cluster.
type ClusterStatus struct {
	ObservedAt        time.Time `json:"observedAt"`
	KubernetesVersion string    `json:"kubernetesVersion"`
	APIServerHealthy  bool      `json:"apiServerHealthy"`
	HealthMessage     string    `json:"healthMessage"`
	NodesTotal        int32     `json:"nodesTotal"`
	NodesReady        int32     `json:"nodesReady"`
	// Allocatable and Allocated map a resource name ("cpu", "memory",
	// "nvidia.com/gpu") to a Kubernetes quantity string ("24", "96Gi").
	// Strings rather than resource.Quantity keep the payload exactly as the
	// agent read it from the API server.
	Allocatable map[string]string `json:"allocatable"`
	Allocated   map[string]string `json:"allocated"`
	// ServedAPIs, when present, replaces what the hub knows of the kinds
	// the member cluster serves (the scheduler avoids clusters that do not
	// serve a workload's kind). It is sent when it changed and in the first
	// report of each session, not every time.
	ServedAPIs *ServedAPIs `json:"servedAPIs,omitempty"`
}

// ServedAPIs lists the group versions a member cluster serves.
type ServedAPIs struct {
	Items []APIEnablement `json:"items"`
}

// APIEnablement is one group version and its resources.
type APIEnablement struct {
	// GroupVersion is "v1" or "apps/v1".
	GroupVersion string        `json:"groupVersion"`
	Resources    []APIResource `json:"resources"`
}

// APIResource is a resource's plural name and its kind.
type APIResource struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// GoAway is sent by either side before it closes the connection on purpose
// (shutdown, rebalancing), so the peer reconnects instead of raising alarms.
type GoAway struct {
	Reason string `json:"reason"`
}

// Error is sent by either side before it closes the connection because of a
// protocol or authorization problem. Code is machine-readable; peers must
// accept codes they do not know.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes for Error.Code.
const (
	CodeUnsupportedVersion = "UnsupportedVersion"
	CodeUnauthorized       = "Unauthorized"
	CodeBadMessage         = "BadMessage"
	// CodeClusterMismatch: Hello.ClusterName differs from the certificate.
	CodeClusterMismatch = "ClusterMismatch"
)

// Error lets a received Error be returned as a Go error.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("flotilla peer error %s", e.Code)
	}
	return fmt.Sprintf("flotilla peer error %s: %s", e.Code, e.Message)
}

// Type implements Message.
func (*Hello) Type() MessageType { return TypeHello }

// Type implements Message.
func (*Welcome) Type() MessageType { return TypeWelcome }

// Type implements Message.
func (*LeaseRenew) Type() MessageType { return TypeLeaseRenew }

// Type implements Message.
func (*LeaseAck) Type() MessageType { return TypeLeaseAck }

// Type implements Message.
func (*ClusterStatus) Type() MessageType { return TypeClusterStatus }

// Type implements Message.
func (*GoAway) Type() MessageType { return TypeGoAway }

// Type implements Message.
func (*Error) Type() MessageType { return TypeError }
