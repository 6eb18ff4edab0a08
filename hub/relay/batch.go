// Package relay is what a hub replica serving agents tells the leading
// replica about them: per cluster, the session serving it, its last lease
// renewal as the serving replica stamped it, and its newest status report.
// The leader's registry applies a Batch as if the agents were connected to
// it, so every replica serves agents while one decides their health.
//
// A Batch travels over the replicas' gossip group (encrypted with their
// shared key); Decode still bounds and checks everything it reads.
package relay

import (
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

// Session is one cluster's session on the sending replica.
type Session struct {
	Cluster string `json:"cluster"`
	// Session identifies the connection (unique across replicas: it
	// starts with the replica's hub ID).
	Session   string `json:"session"`
	Remote    string `json:"remote,omitempty"`
	Transport string `json:"transport,omitempty"`
	// AgentVersion and LeaseSeconds are from the agent's hello (the lease
	// the hub granted).
	AgentVersion string `json:"agentVersion,omitempty"`
	LeaseSeconds int32  `json:"leaseSeconds,omitempty"`
	// ConnectedAt is when the session began, on the sender's clock.
	ConnectedAt time.Time `json:"connectedAt"`
	// LastRenewal is the sender's stamp of the session's last lease
	// renewal (zero: none yet); AgentTime the agent's clock in it.
	LastRenewal time.Time `json:"lastRenewal,omitzero"`
	AgentTime   time.Time `json:"agentTime,omitzero"`
	// Status is the newest status report not sent before, if any.
	Status *protocol.ClusterStatus `json:"status,omitempty"`
	// Replaced is the remote of a session of the cluster on the sender
	// that this one replaced (one session per cluster).
	Replaced string `json:"replaced,omitempty"`
	// Ended, if set, says why the session ended; Dropped: it ended for the
	// sender's own shutdown, which records nothing (the agent reconnects).
	Ended   string `json:"ended,omitempty"`
	Dropped bool   `json:"dropped,omitempty"`
}

// Over reports whether the session has ended.
func (s *Session) Over() bool { return s.Ended != "" || s.Dropped }

// Batch is what one replica sends at once.
type Batch struct {
	// Replica is the sender's election identity (its name in the gossip
	// group); HubID its --hub-id, which Clusters show as connectedTo.
	Replica string `json:"replica"`
	HubID   string `json:"hubID"`
	// Seq numbers the sender's batches from 1: the leader drops one older
	// than a batch it applied (memberlist may deliver them out of order)
	// and asks for a full batch (Resync).
	Seq uint64 `json:"seq"`
	// Full: Sessions lists every live session of the sender, so a session
	// the leader attributes to it and does not find here has ended.
	Full     bool      `json:"full,omitempty"`
	Sessions []Session `json:"sessions"`
}
