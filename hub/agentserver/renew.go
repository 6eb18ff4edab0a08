package agentserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// renewRequestTimeout bounds how long an agent may take to send its renewal
// request once it opened the stream.
const renewRequestTimeout = 10 * time.Second

// serveRenew answers one certificate renewal on an established session:
// one CertificateRenewRequest, one answer, for the session's own cluster
// (the certificate it connected with is the proof), one at a time.
func (s *agentServer) serveRenew(ctx context.Context, sess *agentSession, stream transport.Stream) {
	remote := sess.conn.RemoteAddr().String()
	_ = stream.SetReadDeadline(time.Now().Add(renewRequestTimeout)) // the network's clock
	m, err := protocol.NewAgentReader(stream).ReadMessage()
	if err != nil {
		if !errors.Is(err, io.EOF) && sess.conn.Context().Err() == nil {
			s.endOnReadError(sess, remote, err)
		}
		return
	}
	req, ok := m.(*protocol.CertificateRenewRequest)
	if !ok {
		s.reject(sess.conn, sess.control, remote, protocol.CloseProtocolError, protocol.CodeBadMessage, fmt.Errorf("unexpected %v on a renew stream", m.Type()))
		return
	}
	answer := s.renew(ctx, sess, req)
	log := s.logger.With("cluster", sess.cluster, "session", sess.id, "serial", sess.serial.Text(16))
	if e, ok := answer.(*protocol.Error); ok {
		log.Warn("certificate renewal refused", "code", e.Code, "reason", e.Message)
	} else {
		log.Info("certificate renewed")
	}
	_ = stream.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := protocol.WriteMessage(stream, answer); err != nil {
		log.Warn("renewal answer not delivered", "err", err)
		return
	}
	_ = stream.Close()
}

// renew decides a renewal request of sess.
func (s *agentServer) renew(ctx context.Context, sess *agentSession, req *protocol.CertificateRenewRequest) protocol.Message {
	if s.joins == nil {
		return &protocol.Error{Code: protocol.CodeUnavailable, Message: "this hub does not issue certificates"}
	}
	if !sess.renewing.CompareAndSwap(false, true) {
		return &protocol.Error{Code: protocol.CodeRateLimited, Message: "a renewal is already in flight on this session: wait for its answer"}
	}
	defer sess.renewing.Store(false)
	answer, err := s.joins.Renew(ctx, sess.cluster, sess.serial, req.CSR, req.AcceptsAgentCA)
	if err != nil {
		s.logger.Warn("certificate renewal failed", "cluster", sess.cluster, "err", err)
		return &protocol.Error{Code: protocol.CodeUnavailable, Message: truncate("the hub could not renew the certificate now, renew again later: "+err.Error(), 1024)}
	}
	return answer
}
