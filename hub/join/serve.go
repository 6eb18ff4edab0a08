package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

// requestTimeout bounds how long a join connection may take to send its
// request; answerGrace how long the hub waits for the agent to read the
// answer before it closes the connection.
const (
	requestTimeout = 10 * time.Second
	answerGrace    = 5 * time.Second
)

// Serve runs one join connection: one request, one answer, then close.
func (c *Controller) Serve(ctx context.Context, conn transport.Conn) {
	remote := conn.RemoteAddr().String()
	answer, cluster, err := c.serve(ctx, conn)
	if err != nil {
		c.logger.Warn("join failed", "remote", remote, "cluster", cluster, "err", err)
		_ = conn.CloseWithError(protocol.CloseUnauthorized, "join failed")
		return
	}
	switch a := answer.(type) {
	case *protocol.Error:
		c.logger.Warn("join refused", "remote", remote, "cluster", cluster, "code", a.Code, "reason", a.Message)
	case *protocol.JoinResponse:
		c.logger.Info("join answered", "remote", remote, "cluster", cluster, "pending", a.Pending)
	}
	// The agent closes once it has read the answer.
	select {
	case <-conn.Context().Done():
	case <-time.After(answerGrace):
	case <-ctx.Done():
	}
	_ = conn.CloseWithError(protocol.CloseNormal, "join answered")
}

// serve reads the request and writes the answer it returns.
func (c *Controller) serve(ctx context.Context, conn transport.Conn) (protocol.Message, string, error) {
	readCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	str, err := conn.AcceptStream(readCtx)
	if err != nil {
		return nil, "", fmt.Errorf("accept the join stream: %w", err)
	}
	_ = str.SetReadDeadline(time.Now().Add(requestTimeout))
	req, err := readRequest(str)
	if err != nil {
		return nil, "", err
	}
	answer, err := c.guarded(ctx, req)
	if err != nil {
		return nil, req.ClusterName, err
	}
	_ = str.SetWriteDeadline(time.Now().Add(answerGrace))
	if err := protocol.WriteMessage(str, answer); err != nil {
		return nil, req.ClusterName, fmt.Errorf("answer the join: %w", err)
	}
	_ = str.Close()
	return answer, req.ClusterName, nil
}

// readRequest reads a join stream: its kind, then one JoinRequest of at
// most protocol.MaxJoinFrame bytes.
func readRequest(r io.Reader) (*protocol.JoinRequest, error) {
	if kind, err := protocol.ReadStreamKind(r); err != nil || kind != protocol.StreamJoin {
		return nil, errors.Join(fmt.Errorf("want a join stream, got %v", kind), err)
	}
	m, err := protocol.NewReader(r, protocol.MaxJoinFrame).ReadMessage()
	if err != nil {
		return nil, fmt.Errorf("read the join request: %w", err)
	}
	req, ok := m.(*protocol.JoinRequest)
	if !ok {
		return nil, fmt.Errorf("want a JoinRequest, got %v", m.Type())
	}
	return req, nil
}

// guarded is join, unless the guard refuses the request's token at once;
// a refused token or request counts as a failed join.
func (c *Controller) guarded(ctx context.Context, req *protocol.JoinRequest) (protocol.Message, error) {
	id := bootstraptoken.IDOf(req.BootstrapToken)
	if refusal := c.guard.refusal(id, c.clock.Now()); refusal != "" {
		return &protocol.Error{Code: protocol.CodeRateLimited, Message: refusal}, nil
	}
	answer, err := c.join(ctx, req)
	if e, ok := answer.(*protocol.Error); ok && (e.Code == protocol.CodeTokenRefused || e.Code == protocol.CodeCSRRefused) {
		c.guard.failed(id, c.clock.Now())
	}
	return answer, err
}

// GuardCounts returns the joins refused or failed so far.
func (c *Controller) GuardCounts() GuardCounts { return c.guard.Counts() }

// join decides a request: an Error for a refusal, a JoinResponse with the
// certificate or Pending; an error only when the hub itself failed.
func (c *Controller) join(ctx context.Context, req *protocol.JoinRequest) (protocol.Message, error) {
	if answer := c.pickUp(req); answer != nil {
		return answer, nil
	}
	token, secret, err := bootstraptoken.Authenticate(ctx, c.kube.CoreV1(), req.BootstrapToken, req.ClusterName, c.clock.Now())
	if r, ok := bootstraptoken.Refused(err); ok {
		return &protocol.Error{Code: protocol.CodeTokenRefused, Message: r.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	x509req, err := checkRequest(req.CSR, req.ClusterName)
	if err != nil {
		return &protocol.Error{Code: protocol.CodeCSRRefused, Message: err.Error()}, nil
	}
	taken, err := c.checkIdentity(ctx, req.ClusterName, token)
	if err != nil {
		return nil, err
	}
	if taken != "" {
		return &protocol.Error{Code: protocol.CodeTokenRefused, Message: taken}, nil
	}
	if err := bootstraptoken.Bind(ctx, c.kube.CoreV1(), secret, req.ClusterName); err != nil {
		if r, ok := bootstraptoken.Refused(err); ok {
			return &protocol.Error{Code: protocol.CodeTokenRefused, Message: r.Error()}, nil
		}
		return nil, err
	}
	csr, err := newRequest(req, x509req, c.registration(req, token), token.ID, requestSeconds(c.cfg.CertTTL))
	if err != nil {
		return nil, err
	}
	markIssuer(csr, req.AcceptsAgentCA)
	// Subscribe before creating, so no change is missed.
	changed := c.changeOf(csr.Name)
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{FieldManager: controller.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create certificate request %s: %w", csr.Name, err)
	}
	return c.await(ctx, csr.Name, changed)
}

// await waits up to Config.Wait for request name to be signed or refused.
func (c *Controller) await(ctx context.Context, name string, changed <-chan struct{}) (protocol.Message, error) {
	deadline := time.NewTimer(c.cfg.Wait)
	defer deadline.Stop()
	for {
		if answer := c.answer(name); answer != nil {
			return answer, nil
		}
		select {
		case <-changed:
			changed = c.changeOf(name)
		case <-deadline.C:
			return &protocol.JoinResponse{Pending: true, CACertificate: c.cfg.CA.CertPEM(), Message: c.pendingMessage(name)}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answer is the final answer for request name as the informer has it, or
// nil while it waits.
func (c *Controller) answer(name string) protocol.Message {
	csr, err := c.lister.Get(name)
	if err != nil {
		return nil // not in the informer yet
	}
	if len(csr.Status.Certificate) > 0 {
		return &protocol.JoinResponse{Certificate: csr.Status.Certificate, CACertificate: c.cfg.CA.CertPEM()}
	}
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
			return &protocol.Error{Code: protocol.CodeCSRDenied, Message: fmt.Sprintf("certificate request %s %s: %s: %s", name, cond.Type, cond.Reason, cond.Message)}
		}
	}
	return nil
}

func (c *Controller) pendingMessage(name string) string {
	if c.cfg.Approval == ApprovalManual {
		return fmt.Sprintf("certificate request %s waits for approval: on the hub, kubectl certificate approve %s", name, name)
	}
	return fmt.Sprintf("certificate request %s is not signed yet", name)
}
