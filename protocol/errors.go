package protocol

import "errors"

// Sentinel errors. Functions in this package wrap them with detail; test for
// them with errors.Is.
var (
	// ErrFrameTooLarge: a frame's length exceeds the reader's limit, or an
	// encoded message exceeds HardMaxFrameSize.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrEmptyFrame: a frame's length is zero, so it has not even a type byte.
	ErrEmptyFrame = errors.New("protocol: empty frame")
	// ErrUnknownMessageType: the frame's type byte names no message this
	// version knows.
	ErrUnknownMessageType = errors.New("protocol: unknown message type")
	// ErrBadPayload: the frame's JSON payload does not decode into its type.
	ErrBadPayload = errors.New("protocol: bad payload")
	// ErrInvalidMessage: the message decoded but its content is not
	// acceptable (see the Validate methods).
	ErrInvalidMessage = errors.New("protocol: invalid message")
	// ErrUnknownStreamKind: a stream began with a kind byte this version does
	// not know.
	ErrUnknownStreamKind = errors.New("protocol: unknown stream kind")
	// ErrPeerIdentity: the TLS peer is not an acceptable Flotilla cluster
	// identity (no verified certificate, wrong common name, wrong ALPN).
	ErrPeerIdentity = errors.New("protocol: unacceptable peer identity")
)
