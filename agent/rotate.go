package agent

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// Files of a rotation in progress in Config.CertDir: the new key, written
// before the request is sent, and the new certificate, written before both
// are renamed over tls.key and tls.crt (key first).
const (
	NextKeyFile  = "tls.key.next"
	NextCertFile = "tls.crt.next"
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
// not come from the certificate directory.
func (a *Agent) currentLeaf() *x509.Certificate {
	if a.tls == nil || len(a.tls.Certificates) != 1 || a.cfg.CertDir == "" {
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
				"previousSerial", leaf.SerialNumber.Text(16), "certificate", filepath.Join(a.cfg.CertDir, CertFile))
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
	dir := a.cfg.CertDir
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, NextKeyFile), keyPEM); err != nil {
		return nil, fmt.Errorf("write the new key: %w", err)
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
	if err := installRenewed(dir, resp.Certificate); err != nil {
		return nil, fmt.Errorf("install the renewed certificate: %w", err)
	}
	// Certificate validity is about the real world, not an injected clock.
	tlsConf, err := loadTLSConfig(a.cfg, time.Now())
	if err != nil {
		return nil, fmt.Errorf("load the renewed certificate: %w", err)
	}
	a.tls = tlsConf // the next dial uses it; Run dials only once this session ended
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
		str.CancelRead(0)
		str.CancelWrite(0)
	})
	defer stop()
	if err := protocol.WriteStreamKind(str, protocol.StreamRenew); err != nil {
		return nil, explainConnError(err)
	}
	if err := writeFrame(str, &protocol.CertificateRenewRequest{CSR: csr}, writeTimeout); err != nil {
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
// current, and a client certificate of a CA in roots (ca.crt).
func checkRenewed(key crypto.Signer, cluster string, roots *x509.CertPool, resp *protocol.CertificateRenewResponse, now time.Time) (*x509.Certificate, error) {
	chain, err := parseCertificates(resp.Certificate)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	leaf := chain[0]
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return nil, fmt.Errorf("the certificate is for another key than %s", NextKeyFile)
	}
	if err := checkClientCert(leaf, cluster, now); err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("the certificate is not a client certificate of the hub CA in %s: %w", CAFile, err)
	}
	return leaf, nil
}

// installRenewed writes certPEM as tls.crt.next, then renames tls.key.next
// over tls.key and tls.crt.next over tls.crt. A crash between the renames
// leaves a pair recoverRotation completes.
func installRenewed(dir string, certPEM []byte) error {
	if err := writeFileAtomic(filepath.Join(dir, NextCertFile), certPEM); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, NextKeyFile), filepath.Join(dir, KeyFile)); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, NextCertFile), filepath.Join(dir, CertFile)); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes renames in dir durable; not every file system can sync a
// directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// recoverRotation finishes a rotation a crash interrupted: it makes
// tls.crt and tls.key the newest matching pair among tls.crt.next,
// tls.crt, tls.key and tls.key.next. Nothing happens when no rotation was
// under way.
func recoverRotation(dir string, log *slog.Logger) error {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil
		}
		return data
	}
	cert, key, nextCert, nextKey := read(CertFile), read(KeyFile), read(NextCertFile), read(NextKeyFile)
	if nextCert == nil && nextKey == nil {
		return nil
	}
	matches := func(certPEM, keyPEM []byte) bool {
		if certPEM == nil || keyPEM == nil {
			return false
		}
		_, err := tls.X509KeyPair(certPEM, keyPEM)
		return err == nil
	}
	var renames [][2]string
	switch {
	case matches(nextCert, key): // crashed between the renames
		renames = [][2]string{{NextCertFile, CertFile}}
	case matches(nextCert, nextKey): // crashed before the renames
		renames = [][2]string{{NextKeyFile, KeyFile}, {NextCertFile, CertFile}}
	case matches(cert, key): // no answer yet: keep the current pair
		return nil
	case matches(cert, nextKey):
		renames = [][2]string{{NextKeyFile, KeyFile}}
	default:
		return nil // loading tls.crt and tls.key says what is wrong
	}
	for _, r := range renames {
		if err := os.Rename(filepath.Join(dir, r[0]), filepath.Join(dir, r[1])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("finish the interrupted certificate renewal: %w", err)
		}
	}
	syncDir(dir)
	log.Warn("finished a certificate renewal that was interrupted", "certDir", dir)
	return nil
}
