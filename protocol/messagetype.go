package protocol

import "fmt"

// MessageType is the one-byte type that follows a frame's length.
type MessageType uint8

// Message types. The numbers are on the wire: never renumber them.
const (
	TypeHello         MessageType = 1
	TypeWelcome       MessageType = 2
	TypeLeaseRenew    MessageType = 3
	TypeLeaseAck      MessageType = 4
	TypeClusterStatus MessageType = 5
	TypeGoAway        MessageType = 6
	TypeError         MessageType = 7
	TypeWorkInventory MessageType = 8
	TypeWorkUpsert    MessageType = 9
	TypeWorkDelete    MessageType = 10
	TypeWorkApplied   MessageType = 11
	TypeWorkDeleted   MessageType = 12
	TypeWorkStatus    MessageType = 13
	TypeJoinRequest   MessageType = 14
	TypeJoinResponse  MessageType = 15

	TypeCertificateRenewRequest  MessageType = 16
	TypeCertificateRenewResponse MessageType = 17
)

var messageTypeNames = map[MessageType]string{
	TypeHello:         "Hello",
	TypeWelcome:       "Welcome",
	TypeLeaseRenew:    "LeaseRenew",
	TypeLeaseAck:      "LeaseAck",
	TypeClusterStatus: "ClusterStatus",
	TypeGoAway:        "GoAway",
	TypeError:         "Error",
	TypeWorkInventory: "WorkInventory",
	TypeWorkUpsert:    "WorkUpsert",
	TypeWorkDelete:    "WorkDelete",
	TypeWorkApplied:   "WorkApplied",
	TypeWorkDeleted:   "WorkDeleted",
	TypeWorkStatus:    "WorkStatus",
	TypeJoinRequest:   "JoinRequest",
	TypeJoinResponse:  "JoinResponse",

	TypeCertificateRenewRequest:  "CertificateRenewRequest",
	TypeCertificateRenewResponse: "CertificateRenewResponse",
}

// String returns the message name, or MessageType(n) for unknown numbers.
func (t MessageType) String() string {
	if name, ok := messageTypeNames[t]; ok {
		return name
	}
	return fmt.Sprintf("MessageType(%d)", uint8(t))
}

// newMessage returns a fresh, empty message of type t to decode into.
// Returning wireMessage makes the compiler check that every message type can
// be validated.
func newMessage(t MessageType) (wireMessage, error) {
	switch t {
	case TypeHello:
		return new(Hello), nil
	case TypeWelcome:
		return new(Welcome), nil
	case TypeLeaseRenew:
		return new(LeaseRenew), nil
	case TypeLeaseAck:
		return new(LeaseAck), nil
	case TypeClusterStatus:
		return new(ClusterStatus), nil
	case TypeGoAway:
		return new(GoAway), nil
	case TypeError:
		return new(Error), nil
	case TypeWorkInventory:
		return new(WorkInventory), nil
	case TypeWorkUpsert:
		return new(WorkUpsert), nil
	case TypeWorkDelete:
		return new(WorkDelete), nil
	case TypeWorkApplied:
		return new(WorkApplied), nil
	case TypeWorkDeleted:
		return new(WorkDeleted), nil
	case TypeWorkStatus:
		return new(WorkStatus), nil
	case TypeJoinRequest:
		return new(JoinRequest), nil
	case TypeJoinResponse:
		return new(JoinResponse), nil
	case TypeCertificateRenewRequest:
		return new(CertificateRenewRequest), nil
	case TypeCertificateRenewResponse:
		return new(CertificateRenewResponse), nil
	}
	return nil, fmt.Errorf("%w %d", ErrUnknownMessageType, uint8(t))
}
