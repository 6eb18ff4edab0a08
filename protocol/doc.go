// Package protocol is the wire format between a Flotilla agent and the hub.
//
// The agent in each member cluster dials the hub over QUIC (TLS 1.3, mutual
// authentication, ALPN [ALPN]). Every stream begins with one [StreamKind] byte
// written by the side that opened it, so the acceptor knows the stream's role,
// followed by a sequence of frames:
//
//	+----------------+--------+---------------------+
//	| length (4, BE) | type 1 | JSON payload (N-1)  |
//	+----------------+--------+---------------------+
//
// The length N counts the type byte and the payload. [WriteMessage] emits a
// frame with one Write call; a [Reader] decodes frames, rejects anything above
// its size limit before allocating for it, and validates every message it
// returns, so callers only ever see well-formed messages. Unknown JSON fields
// are ignored so that newer peers can add fields; unknown message types are
// errors, because a peer that sends them speaks a different protocol version.
//
// The control stream ([StreamControl]) carries Hello/Welcome, lease renewals
// and their acks, GoAway and Error; cluster status travels on its own stream
// ([StreamStatus]). QUIC flow-controls each stream independently, so a large
// status message that is still being delivered never delays a lease renewal:
// heartbeats never wait behind bulk data, which would otherwise turn a slow
// link into a false "cluster lost". When both peers enable QUIC datagrams
// (QUICConfig does), renewals and acks travel as datagrams instead (see
// EncodeDatagram), so that a lost renewal delays none after it either.
//
// This package holds no connection state and runs no goroutines; the hub and
// the agent own the loops.
package protocol

// ALPN is the TLS application protocol both sides must negotiate. A peer that
// offers anything else fails the handshake instead of misparsing frames.
const ALPN = "flotilla/1"

// Version is the protocol version carried in Hello and Welcome. It changes
// when the meaning of existing messages changes; adding optional fields does
// not need a new version.
const Version = 1
