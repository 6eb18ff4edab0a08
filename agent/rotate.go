package agent

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// rotateAt is the share of a certificate's lifetime after which the
	// agent renews it.
	rotateAt = 0.8
	// Renewal retries: from a minute, doubling to an hour, never more
	// often than once a minute.
	rotateBackoffInitial = time.Minute
	rotateBackoffMax     = time.Hour
	// renewAttemptTimeout bounds one renewal request on the session. The
	// hub answers within about 30 s.
	renewAttemptTimeout = 60 * time.Second
)

// errRotated ends a session after the agent renewed its certificate: it
// reconnects at once with the new one.
var errRotated = errors.New("certificate renewed: reconnecting with the new certificate")

// rotation is the agent's renewal schedule across sessions; only the
// running session's rotateLoop uses it.
type rotation struct {
	notBefore time.Time // no attempt before this (after a failure)
	backoff   *backoff
}

func newRotation() rotation {
	return rotation{backoff: newBackoff(rotateBackoffInitial, rotateBackoffMax, rand.NewPCG(rand.Uint64(), rand.Uint64()))}
}

// renewalDue is when a certificate is renewed: at 80 % of its lifetime.
func renewalDue(leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(time.Duration(float64(life) * rotateAt))
}

// currentLeaf is the certificate the agent connects with, nil if it does
// not come from a credential store.
func (a *Agent) currentLeaf() *x509.Certificate {
	if a.tls == nil || len(a.tls.Certificates) != 1 || a.store == nil {
		return nil
	}
	return a.tls.Certificates[0].Leaf
}

// rotateLoop renews the session's certificate when it is due (at once if
// past 80 % of its lifetime), retrying failures with backoff. It returns
// errRotated after a renewal, so the session ends and the agent reconnects
// with the new certificate, or nil when ctx ends.
func (s *session) rotateLoop(ctx context.Context) error {
	a := s.agent
	leaf := a.currentLeaf()
	if leaf == nil {
		<-ctx.Done()
		return nil
	}
	for {
		due := renewalDue(leaf)
		if a.rotation.notBefore.After(due) {
			due = a.rotation.notBefore
		}
		if wait := due.Sub(a.clock.Now()); wait > 0 && !a.sleep(ctx, wait) {
			return nil
		}
		renewed, err := s.rotate(ctx, leaf)
		if err == nil {
			a.rotation.notBefore = time.Time{}
			a.rotation.backoff.Reset()
			s.log.Info("certificate renewed", "serial", renewed.SerialNumber.Text(16), "expires", renewed.NotAfter.UTC(),
				"previousSerial", leaf.SerialNumber.Text(16), "certificate", a.store.Location(credstore.CertFile))
			return errRotated
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := max(a.rotation.backoff.Next(), rotateBackoffInitial)
		a.rotation.notBefore = a.clock.Now().Add(delay)
		var peerErr *protocol.Error
		if errors.As(err, &peerErr) {
			s.log.Error("the hub did not renew the certificate", "code", peerErr.Code, "message", peerErr.Message,
				"expires", leaf.NotAfter.UTC(), "retryIn", delay)
		} else {
			s.log.Error("cannot renew the certificate", "err", err, "expires", leaf.NotAfter.UTC(), "retryIn", delay)
		}
	}
}

// rotate makes a new key (tls.key.next), asks the hub on the session for
// its certificate, checks it and installs both; then a.tls uses them.
func (s *session) rotate(ctx context.Context, leaf *x509.Certificate) (*x509.Certificate, error) {
	a := s.agent
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := a.store.SaveNextKey(ctx, keyPEM); err != nil {
		return nil, fmt.Errorf("store the new key: %w", err)
	}
	csr, err := certificateRequest(key, a.cfg.ClusterName)
	if err != nil {
		return nil, err
	}
	s.log.Info("renewing the certificate", "serial", leaf.SerialNumber.Text(16), "expires", leaf.NotAfter.UTC())
	resp, err := s.requestRenewal(ctx, csr)
	if err != nil {
		return nil, err
	}
	renewed, err := checkRenewed(key, a.cfg.ClusterName, a.tls.RootCAs, resp, time.Now())
	if err != nil {
		return nil, fmt.Errorf("the certificate the hub renewed is not acceptable, nothing replaced: %w", err)
	}
	if err := a.store.InstallRenewed(ctx, resp.Certificate); err != nil {
		return nil, fmt.Errorf("install the renewed certificate: %w", err)
	}
	// The next dial uses it; Run dials only once this session ended.
	if err := a.loadCredentials(ctx); err != nil {
		return nil, fmt.Errorf("load the renewed certificate: %w", err)
	}
	return renewed, nil
}

// requestRenewal sends csr on a renew stream of the session and returns
// the hub's certificate, or its Error.
func (s *session) requestRenewal(ctx context.Context, csr []byte) (*protocol.CertificateRenewResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, renewAttemptTimeout)
	defer cancel()
	str, err := s.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("open a renew stream: %w", explainConnError(err))
	}
	stop := context.AfterFunc(ctx, func() {
		str.CancelRead()
		str.CancelWrite()
	})
	defer stop()
	if err := protocol.WriteStreamKind(str, protocol.StreamRenew); err != nil {
		return nil, explainConnError(err)
	}
	if err := writeFrame(str, &protocol.CertificateRenewRequest{CSR: csr, AcceptsAgentCA: true}, writeTimeout); err != nil {
		return nil, fmt.Errorf("send the renewal request: %w", explainConnError(err))
	}
	str.Close() // the request is all this side sends
	m, err := protocol.NewReader(str, protocol.MaxRenewFrame).ReadMessage()
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer to the renewal within %v", renewAttemptTimeout)
		}
		return nil, fmt.Errorf("read the hub's answer to the renewal: %w", explainConnError(err))
	}
	switch m := m.(type) {
	case *protocol.CertificateRenewResponse:
		return m, nil
	case *protocol.Error:
		return nil, m
	}
	return nil, fmt.Errorf("%w: the hub answered a renewal with %v", errProtocol, m.Type())
}

// checkRenewed checks that a renewed certificate is for key and cluster,
// current, and a client certificate of a CA in trusted (ca.crt) or of the
// agent CA the hub sent after it (issuerPools).
func checkRenewed(key crypto.Signer, cluster string, trusted *x509.CertPool, resp *protocol.CertificateRenewResponse, now time.Time) (*x509.Certificate, error) {
	chain, err := parseCertificates(resp.Certificate)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	leaf := chain[0]
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return nil, fmt.Errorf("the certificate is for another key than %s", credstore.NextKeyFile)
	}
	if err := checkClientCert(leaf, cluster, now); err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	roots, intermediates := issuerPools(trusted, chain)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("the certificate is not a client certificate of the hub CA in %s or of the agent CA the hub sent: %w", credstore.CAFile, err)
	}
	return leaf, nil
}
