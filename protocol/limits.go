package protocol

import (
	"fmt"
	"io"
)

// What an agent sends is bounded per message kind: a hub serves thousands
// of agents, and one of them (buggy, or holding a stolen certificate) must
// not make it read, buffer or store more than an honest agent ever needs.
// Only the hub → agent direction of a work stream carries large frames
// (MaxWorkFrameSize: whole manifests).

// agentLimits is the largest frame the hub reads for each message an agent
// sends, far above what an honest agent sends.
var agentLimits = map[MessageType]int{
	TypeHello:      16 << 10,
	TypeLeaseRenew: 1 << 10,
	TypeGoAway:     8 << 10,
	TypeError:      8 << 10,
	// ServedAPIs of a cluster with hundreds of CRDs is ~100 KiB.
	TypeClusterStatus: 1 << 20,
	// One per work stream: ~100 bytes per Work held.
	TypeWorkInventory: 4 << 20,
	// Manifest results of one Work; what the hub stores of them is
	// bounded again (hub/dispatch).
	TypeWorkApplied:             1 << 20,
	TypeWorkStatus:              1 << 20,
	TypeWorkDeleted:             1 << 10,
	TypeCertificateRenewRequest: MaxRenewFrame,
	TypeJoinRequest:             MaxJoinFrame,
}

// hubOnlyLimit bounds messages only the hub sends, should an agent send
// one: it is refused, after a small read.
const hubOnlyLimit = 1 << 10

// MaxAgentFrameSize is the largest frame the hub reads from an agent, of
// any kind.
const MaxAgentFrameSize = 4 << 20

// AgentMessageLimit is the largest frame of message type t the hub reads
// from an agent.
func AgentMessageLimit(t MessageType) int {
	if limit, ok := agentLimits[t]; ok {
		return limit
	}
	return hubOnlyLimit
}

// NewAgentReader returns a Reader for what an agent sends: a frame larger
// than its message kind's AgentMessageLimit is refused with
// ErrFrameTooLarge once its type byte is read, before its payload is.
func NewAgentReader(r io.Reader) *Reader {
	reader := NewReader(r, MaxAgentFrameSize)
	reader.typeLimit = AgentMessageLimit
	return reader
}

// checkTypeLimit applies the Reader's per-kind limit to a frame of size
// bytes whose type byte is t.
func (r *Reader) checkTypeLimit(t MessageType, size uint32) error {
	if r.typeLimit == nil {
		return nil
	}
	if limit := r.typeLimit(t); int64(size) > int64(limit) {
		return fmt.Errorf("read %v frame: %w: %d bytes exceeds the limit of %d bytes for this message", t, ErrFrameTooLarge, size, limit)
	}
	return nil
}
