package protocol

import (
	"encoding/binary"
	"fmt"
)

// Lease renewals and their acks also travel as QUIC datagrams (RFC 9221)
// when both peers enable them (QUICConfig does; a peer sees it in
// ConnectionState().SupportsDatagrams). A datagram holds exactly one frame,
// framed as on a stream. A lost datagram is not sent again, and the next
// renewal never waits behind it: on a lossy or flapping link a renewal on
// the control stream queues behind lost ones and behind QUIC's
// retransmission back-off and can miss the moments the link works, while
// a heartbeat only needs the newest one to arrive. Renewals on the control
// stream stay valid for peers without datagrams.

// MaxDatagramFrame is the largest datagram frame either side sends or
// reads. Real ones are about 100 bytes; a QUIC packet carries about 1,200.
const MaxDatagramFrame = 512

// datagramTypes are the messages a datagram may carry.
var datagramTypes = map[MessageType]bool{TypeLeaseRenew: true, TypeLeaseAck: true}

// EncodeDatagram encodes a LeaseRenew or LeaseAck as one datagram.
func EncodeDatagram(m Message) ([]byte, error) {
	if m != nil && !isNilPointer(m) && !datagramTypes[m.Type()] {
		return nil, fmt.Errorf("%w: %v is not sent as a datagram", ErrInvalidMessage, m.Type())
	}
	return encodeFrame(m, MaxDatagramFrame)
}

// DatagramSender sends QUIC datagrams; *quic.Conn is one.
type DatagramSender interface{ SendDatagram([]byte) error }

// SendDatagram encodes a LeaseRenew or LeaseAck as one datagram and sends
// it on c.
func SendDatagram(c DatagramSender, m Message) error {
	b, err := EncodeDatagram(m)
	if err != nil {
		return err
	}
	return c.SendDatagram(b)
}

// DecodeDatagram decodes and validates the one frame of a datagram: its
// length must be the datagram's, and its message a LeaseRenew or LeaseAck.
// Errors wrap ErrFrameTooLarge, ErrEmptyFrame, ErrBadPayload,
// ErrUnknownMessageType or ErrInvalidMessage.
func DecodeDatagram(b []byte) (Message, error) {
	if len(b) > lengthSize+MaxDatagramFrame {
		return nil, fmt.Errorf("read datagram: %w: %d bytes exceeds the limit of %d bytes", ErrFrameTooLarge, len(b), lengthSize+MaxDatagramFrame)
	}
	if len(b) <= lengthSize {
		return nil, fmt.Errorf("read datagram: %w: %d bytes", ErrEmptyFrame, len(b))
	}
	if size := binary.BigEndian.Uint32(b); size != uint32(len(b)-lengthSize) {
		return nil, fmt.Errorf("%w: datagram of %d bytes holds a frame of length %d", ErrBadPayload, len(b), size)
	}
	t := MessageType(b[lengthSize])
	if _, known := messageTypeNames[t]; known && !datagramTypes[t] {
		return nil, fmt.Errorf("%w: %v in a datagram", ErrInvalidMessage, t)
	}
	return decode(t, b[lengthSize+1:])
}
