package agentserver

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/protocol"
)

// datagramLoop answers the lease renewals an agent sends as QUIC datagrams,
// each with a LeaseAck datagram, until the connection or ctx ends. A lost
// ack is not sent again: the agent's next renewal gets its own. A datagram
// that is not a well-formed renewal ends the session as a bad frame on the
// control stream does.
func (s *agentServer) datagramLoop(ctx context.Context, sess *agentSession, remote string) {
	for {
		b, err := sess.conn.ReceiveDatagram(ctx)
		if err != nil {
			return // the connection or the session ended
		}
		m, err := protocol.DecodeDatagram(b)
		renew, ok := m.(*protocol.LeaseRenew)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %v in a datagram from an agent", protocol.ErrInvalidMessage, m.Type())
		}
		if err != nil {
			s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
			return
		}
		s.renewalDatagrams.Add(1)
		hubTime, err := s.renewLease(sess, remote, renew)
		if err != nil {
			s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, err)
			return
		}
		err = protocol.SendDatagram(sess.conn, &protocol.LeaseAck{Seq: renew.Seq, HubTime: hubTime})
		if err != nil && sess.conn.Context().Err() == nil {
			s.logger.Debug("lease ack datagram not sent", "cluster", sess.cluster, "err", err)
		}
	}
}
