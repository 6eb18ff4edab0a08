package protocol

import (
	"time"

	"github.com/quic-go/quic-go"
)

// QUICConfig returns the QUIC settings both the hub and the agent use. Each
// call returns a new value that the caller may adjust.
func QUICConfig() *quic.Config {
	return &quic.Config{
		// The agent is usually behind NAT and otherwise quiet between lease
		// renewals. Many NATs and firewalls forget a UDP mapping after about
		// 30 s of silence; a PING every 10 s keeps the mapping (and the hub's
		// route back to the agent) alive. quic-go's default is no keep-alive.
		KeepAlivePeriod: 10 * time.Second,
		// With keep-alives every 10 s, 30 s of silence means about three
		// missed rounds: the peer or the path is gone, so let the
		// connection die and the agent redial, instead of waiting on a dead
		// path. The effective value is the smaller of both peers' settings.
		MaxIdleTimeout: 30 * time.Second,
		// quic-go's default is 5 s. After a hub restart thousands of agents
		// reconnect at once and a busy hub completes a few hundred handshakes
		// per second, so give slow handshakes more time before the agent
		// backs off and retries (which only adds load), but not so long that
		// a black-holed dial stalls reconnection.
		HandshakeIdleTimeout: 10 * time.Second,
		// Lease renewals and acks go as datagrams (see EncodeDatagram).
		EnableDatagrams: true,
	}
}
