package protocol

import "github.com/quic-go/quic-go"

// Application error codes for closing a QUIC connection. A side that closes
// for a reason the peer should act on sends an Error or GoAway message first
// when it can; the code is what remains when it cannot (for example before
// any stream exists).
const (
	// CloseNormal: an orderly close after GoAway.
	CloseNormal quic.ApplicationErrorCode = 0
	// CloseProtocolError: the peer sent something this side cannot accept.
	CloseProtocolError quic.ApplicationErrorCode = 1
	// CloseUnauthorized: the peer's identity is not acceptable.
	CloseUnauthorized quic.ApplicationErrorCode = 2
	// CloseGoingAway: this side is shutting down; reconnect elsewhere or later.
	CloseGoingAway quic.ApplicationErrorCode = 3
)
