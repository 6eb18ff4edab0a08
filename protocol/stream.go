package protocol

import (
	"fmt"
	"io"
)

// StreamKind is the first byte on every stream, written by the side that
// opened it, so the acceptor knows what the stream carries without relying on
// the order in which streams arrive.
type StreamKind uint8

// Stream kinds. The numbers are on the wire: never renumber them.
const (
	// StreamControl carries Hello, Welcome, LeaseRenew, LeaseAck, GoAway and
	// Error. It is opened by the agent right after dialing.
	StreamControl StreamKind = 1
	// StreamStatus carries ClusterStatus, kept off the control stream so
	// lease renewals never queue behind it.
	StreamStatus StreamKind = 2
	// StreamWork carries Works down and their results up (see work.go). It
	// is opened by the agent after Welcome; frames may be MaxWorkFrameSize.
	StreamWork StreamKind = 3
	// StreamJoin carries one JoinRequest and its answer, on a join
	// connection (JoinALPN) only.
	StreamJoin StreamKind = 4
	// StreamRenew carries one CertificateRenewRequest and its answer, on a
	// session connection, opened by the agent after Welcome (renew.go).
	StreamRenew StreamKind = 5
)

// String returns the kind's name, or StreamKind(n) for unknown numbers.
func (k StreamKind) String() string {
	switch k {
	case StreamControl:
		return "control"
	case StreamStatus:
		return "status"
	case StreamWork:
		return "work"
	case StreamJoin:
		return "join"
	case StreamRenew:
		return "renew"
	}
	return fmt.Sprintf("StreamKind(%d)", uint8(k))
}

func (k StreamKind) known() bool {
	return k == StreamControl || k == StreamStatus || k == StreamWork || k == StreamJoin || k == StreamRenew
}

// WriteStreamKind writes the kind byte that must start a newly opened stream.
func WriteStreamKind(w io.Writer, k StreamKind) error {
	if !k.known() {
		return fmt.Errorf("write stream kind: %w %d", ErrUnknownStreamKind, uint8(k))
	}
	if _, err := w.Write([]byte{byte(k)}); err != nil {
		return fmt.Errorf("write %v stream kind: %w", k, err)
	}
	return nil
}

// ReadStreamKind reads the kind byte at the start of an accepted stream. An
// unknown kind is an error: the peer speaks a protocol this side does not.
func ReadStreamKind(r io.Reader) (StreamKind, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("read stream kind: %w", err)
	}
	k := StreamKind(b[0])
	if !k.known() {
		return 0, fmt.Errorf("read stream kind: %w %d", ErrUnknownStreamKind, b[0])
	}
	return k, nil
}
