package agent

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// errProtocol marks a session that ended because the hub sent something
// this agent cannot accept; the agent answers with Error(BadMessage).
var errProtocol = errors.New("hub broke the protocol")

// goAwayError ends a session because the hub asked the agent to go away
// (hub shutdown, rebalancing): the agent reconnects without alarm.
type goAwayError struct{ reason string }

func (e *goAwayError) Error() string { return fmt.Sprintf("hub sent GoAway: %q", e.reason) }

// malformed reports whether err says a frame from the hub was not a valid
// message of this protocol version.
func malformed(err error) bool {
	for _, target := range []error{protocol.ErrFrameTooLarge, protocol.ErrEmptyFrame,
		protocol.ErrUnknownMessageType, protocol.ErrBadPayload, protocol.ErrInvalidMessage} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// explainConnError adds advice to QUIC errors whose cause an operator can
// fix, above all TLS failures: with TLS 1.3 a hub that rejects the agent's
// certificate is only noticed on the first read after the dial succeeded.
func explainConnError(err error) error {
	var te *quic.TransportError
	if errors.As(err, &te) && te.ErrorCode.IsCryptoError() {
		alert := tls.AlertError(uint8(te.ErrorCode - 0x100))
		if te.Remote {
			return fmt.Errorf("the hub rejected this agent in the TLS handshake (%v): "+
				"check that the hub trusts the CA that signed %s and that the certificate is current: %w", alert, credstore.CertFile, err)
		}
		return fmt.Errorf("TLS handshake with the hub failed (%v): check that %s holds the CA "+
			"that signed the hub's certificate and that the certificate covers the --hub host: %w", alert, credstore.CAFile, err)
	}
	var ae *quic.ApplicationError
	var closed *transport.ClosedError
	if errors.As(err, &ae) && ae.Remote || errors.As(err, &closed) && closed.Remote {
		return fmt.Errorf("the hub closed the connection: %w", err)
	}
	var idle *quic.IdleTimeoutError
	if errors.As(err, &idle) {
		return fmt.Errorf("the hub stopped answering: %w", err)
	}
	return err
}
