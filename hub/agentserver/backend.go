package agentserver

import (
	"context"
	"math/big"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

// Backend is what the agent server asks about clusters and tells about
// their sessions: the registry of the hub it runs in (package registry),
// or, on a hub replica that serves agents for a leader, the relay to the
// leader's registry (package replicas).
type Backend interface {
	CheckCertificate(ctx context.Context, cluster string, serial *big.Int) error
	ConfirmCertificate(ctx context.Context, cluster string, serial *big.Int) error
	CertificateInUse(ctx context.Context, cluster string, serial *big.Int) error
	Connect(ctx context.Context, hello *protocol.Hello, session, remote, transport string) error
	Disconnect(cluster, session, reason string)
	DropSession(cluster, session string)
	Renew(cluster, holder string, agentTime time.Time) (time.Time, error)
	Status(cluster string, report *protocol.ClusterStatus) error
	SessionReplaced(cluster, oldRemote, newRemote string)
}
