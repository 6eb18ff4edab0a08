package agent

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flotilla-io/flotilla/agent/credstore"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/version"
	"github.com/flotilla-io/flotilla/protocol"
	"github.com/flotilla-io/flotilla/transport"
)

const (
	// joinAttemptTimeout bounds one join attempt, dial to answer. The hub
	// answers within about 30 s, with a certificate or Pending.
	joinAttemptTimeout = 60 * time.Second
	// Join retries (after Pending or a failure): from 5 s, doubling to 1
	// min, jittered as the reconnect backoff is.
	joinBackoffInitial = 5 * time.Second
	joinBackoffMax     = time.Minute
)

// joinRefusedError ends a join for good: the hub refused the token or the
// request, the hub is not the one the CA hash names, or its certificate is
// not acceptable. Retrying would not change the answer; an operator must act.
type joinRefusedError struct{ err error }

func (e *joinRefusedError) Error() string { return e.err.Error() }
func (e *joinRefusedError) Unwrap() error { return e.err }

// join gets the agent its certificate with the bootstrap token, stores
// ca.crt and tls.crt, and sets a.tls from them. The key (tls.key) is made
// and stored before anything is sent, or reused if a previous join left it
// (one still waiting for approval, perhaps by another replica). While
// the request waits for approval, or the hub cannot be reached, it retries
// with backoff until ctx ends; a refusal ends it with an error that quotes
// the hub.
func (a *Agent) join(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // write nothing for an agent stopped before it began
	}
	pin, err := pki.ParsePin(a.cfg.HubCAHash)
	if err != nil {
		return err // validate checked it
	}
	log := a.log.With("hub", a.cfg.Hub, "tokenID", a.cfg.BootstrapToken[:6])
	key, err := a.joinKey(ctx, log)
	if err != nil {
		return err
	}
	csr, err := certificateRequest(key, a.cfg.ClusterName)
	if err != nil {
		return err
	}
	agentVersion := a.cfg.Version
	if agentVersion == "" {
		agentVersion = version.Get().Flotilla
	}
	req := &protocol.JoinRequest{
		ProtocolVersion: protocol.Version,
		ClusterName:     a.cfg.ClusterName,
		BootstrapToken:  a.cfg.BootstrapToken,
		CSR:             csr,
		AgentVersion:    agentVersion,
		Provider:        a.cfg.Provider,
		Region:          a.cfg.Region,
		Zone:            a.cfg.Zone,
		Labels:          a.cfg.Labels,
		AcceptsAgentCA:  true,
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("join request: %w", err)
	}
	if ignored := a.cfg.metadataTheHubIgnores(); len(ignored) > 0 {
		log.Warn("the hub takes provider, region, zone and labels from the token, not from the agent: it ignores these (set them with flotilla token create --provider/--region/--zone/--label, or on the Cluster); the agent may set only labels under "+protocol.AgentLabelPrefix,
			"ignored", strings.Join(ignored, ","))
	}
	log.Info("no certificate yet: joining the hub with a bootstrap token", "store", a.store.Location(credstore.CertFile))
	b := newBackoff(joinBackoffInitial, joinBackoffMax, a.jitter)
	for {
		resp, err := a.joinOnce(ctx, pin, req)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var refused *joinRefusedError
		var peerErr *protocol.Error
		var delay time.Duration
		switch {
		case errors.As(err, &refused):
			return err
		case errors.As(err, &peerErr):
			delay = b.Next()
			log.Error("the hub could not take the join request", "code", peerErr.Code, "message", peerErr.Message, "retryIn", delay)
		case err != nil:
			delay = b.Next()
			log.Warn("cannot join the hub", "err", err, "retryIn", delay)
		case resp.Pending:
			delay = b.Next()
			log.Info("join waits for approval", "message", resp.Message, "retryIn", delay)
		default:
			leaf, err := a.saveJoinCertificate(ctx, key, pin, resp)
			if err != nil {
				return err
			}
			log.Info("joined", "certificate", a.store.Location(credstore.CertFile),
				"serial", leaf.SerialNumber.Text(16), "expires", leaf.NotAfter.UTC())
			a.forgetToken(ctx, log)
			return a.loadCredentials(ctx)
		}
		if !a.sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// forgetToken empties the bootstrap token in its Secret once the joined
// certificate is stored: the member cluster keeps no copy of it. A
// failure is a warning; the hub refuses a used token anyway.
func (a *Agent) forgetToken(ctx context.Context, log *slog.Logger) {
	if a.token == nil {
		return
	}
	emptied, err := a.token.Forget(ctx)
	switch {
	case err != nil:
		log.Warn("could not empty the bootstrap token after the join (the hub will not take it again)", "err", err)
	case emptied:
		log.Info("emptied the bootstrap token: the agent authenticates with its certificate from now on",
			"secret", a.token.Namespace+"/"+a.token.Name, "key", a.token.Key)
	}
}

// joinOnce dials the hub for a join, sends req and returns the answer. The
// hub is trusted only if its certificate chain has the CA with pin.
func (a *Agent) joinOnce(ctx context.Context, pin string, req *protocol.JoinRequest) (*protocol.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, a.joinTimeout)
	defer cancel()
	tlsConf := protocol.JoinTLSConfig(pin)
	verify := tlsConf.VerifyConnection
	var wrongHub atomic.Bool
	tlsConf.VerifyConnection = func(cs tls.ConnectionState) error {
		err := verify(cs)
		wrongHub.Store(err != nil)
		return err
	}
	conn, release, err := a.dial(ctx, tlsConf, explainJoinError)
	if err != nil {
		if wrongHub.Load() {
			return nil, &joinRefusedError{fmt.Errorf("the hub at %s does not present the CA that --hub-ca-hash names "+
				"(is it the hash `flotilla token create` printed, and --hub the hub's address?): %w", a.cfg.Hub, err)}
		}
		return nil, attemptError(ctx, a.joinTimeout, err)
	}
	defer release()
	defer conn.CloseWithError(protocol.CloseNormal, "")
	stop := context.AfterFunc(ctx, func() { conn.CloseWithError(protocol.CloseNormal, "join attempt ended") })
	defer stop()
	a.checkHubName(conn)

	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, attemptError(ctx, a.joinTimeout, explainConnError(err))
	}
	if err := protocol.WriteStreamKind(str, protocol.StreamJoin); err != nil {
		return nil, attemptError(ctx, a.joinTimeout, explainConnError(err))
	}
	if err := protocol.WriteMessage(str, req); err != nil {
		return nil, attemptError(ctx, a.joinTimeout, explainConnError(err))
	}
	str.Close() // the request is all this side sends
	m, err := protocol.NewReader(str, protocol.MaxJoinFrame).ReadMessage()
	if err != nil {
		return nil, attemptError(ctx, a.joinTimeout, fmt.Errorf("read the hub's answer: %w", explainConnError(err)))
	}
	switch m := m.(type) {
	case *protocol.JoinResponse:
		return m, nil
	case *protocol.Error:
		switch m.Code {
		case protocol.CodeTokenRefused, protocol.CodeCSRRefused, protocol.CodeCSRDenied:
			return nil, &joinRefusedError{fmt.Errorf("the hub refused to let cluster %q join: %w", a.cfg.ClusterName, m)}
		}
		return nil, m
	default:
		return nil, fmt.Errorf("%w: the hub answered a join with %v", errProtocol, m.Type())
	}
}

// checkHubName warns when the hub's certificate does not cover the --hub
// host: a join trusts the pin alone, but sessions check the name.
func (a *Agent) checkHubName(conn transport.Conn) {
	certs := conn.TLS().PeerCertificates
	host, _, err := net.SplitHostPort(a.lastHubAddr(conn.Kind()))
	if err != nil || len(certs) == 0 {
		return
	}
	if err := certs[0].VerifyHostname(host); err != nil {
		a.log.Warn("the hub's certificate does not cover the --hub host: joining works, sessions will not", "err", err)
	}
}

// attemptError says when a join attempt ended because it ran out of time.
func attemptError(ctx context.Context, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer from the hub within %v: %w", timeout, err)
	}
	return err
}

// alertNoApplicationProtocol is TLS's no_application_protocol alert.
const alertNoApplicationProtocol tls.AlertError = 120

// explainJoinError adds advice to a failed join handshake. (Locally, only
// the pin check fails it, which joinOnce explains.)
func explainJoinError(err error) error {
	var te *quic.TransportError
	if errors.As(err, &te) && te.ErrorCode.IsCryptoError() {
		if !te.Remote {
			return err
		}
		alert := tls.AlertError(uint8(te.ErrorCode - 0x100))
		if alert == alertNoApplicationProtocol {
			return fmt.Errorf("the hub does not offer joining (%v): is it a Flotilla hub of this version? %w", alert, err)
		}
		return fmt.Errorf("the hub refused the join connection in the TLS handshake (%v): %w", alert, err)
	}
	return explainConnError(err)
}

// saveJoinCertificate checks the hub's answer and stores ca.crt and
// tls.crt; it returns the certificate. A certificate that is not for key
// and this cluster, or that does not lead to the pinned CA, is refused and
// nothing is written.
func (a *Agent) saveJoinCertificate(ctx context.Context, key crypto.Signer, pin string, resp *protocol.JoinResponse) (*x509.Certificate, error) {
	leaf, err := checkJoinResponse(key, a.cfg.ClusterName, pin, resp, time.Now())
	if err != nil {
		return nil, &joinRefusedError{fmt.Errorf("the certificate the hub issued is not acceptable, nothing written: %w", err)}
	}
	if err := a.store.SaveJoined(ctx, resp.CACertificate, resp.Certificate); err != nil {
		return nil, fmt.Errorf("save the joined certificate: %w", err)
	}
	return leaf, nil
}

// checkJoinResponse checks that the certificate resp carries is for key
// and cluster, current, for client authentication, and issued by a CA in
// resp.CACertificate whose public key has pin, or by the agent CA the hub
// sent after it (issuerPools).
func checkJoinResponse(key crypto.Signer, cluster, pin string, resp *protocol.JoinResponse, now time.Time) (*x509.Certificate, error) {
	chain, err := parseCertificates(resp.Certificate)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	leaf := chain[0]
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return nil, fmt.Errorf("the certificate is for another key than %s", credstore.KeyFile)
	}
	if err := checkClientCert(leaf, cluster, now); err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	cas, err := parseCertificates(resp.CACertificate)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	pinned := slices.DeleteFunc(cas, func(ca *x509.Certificate) bool { return !pki.MatchesPin(ca, pin) })
	if len(pinned) == 0 {
		return nil, fmt.Errorf("the CA certificate the hub sent is not the one --hub-ca-hash %s names", pin)
	}
	trusted := x509.NewCertPool()
	for _, ca := range pinned {
		trusted.AddCert(ca)
	}
	roots, intermediates := issuerPools(trusted, chain)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("the certificate is not a client certificate of the pinned CA or of the agent CA the hub sent: %w", err)
	}
	return leaf, nil
}

// parseCertificates parses PEM certificates; there must be at least one,
// and nothing else.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// joinKey returns the key a previous join stored as tls.key, or makes an
// ECDSA P-256 key and stores it first.
func (a *Agent) joinKey(ctx context.Context, log *slog.Logger) (crypto.Signer, error) {
	c, err := a.store.Load(ctx)
	if err != nil {
		return nil, err
	}
	if c.Key != nil {
		key, err := parseKey(c.Key)
		if err != nil {
			return nil, fmt.Errorf("client key %s: %w (remove it to join with a new key)", a.store.Location(credstore.KeyFile), err)
		}
		log.Info("joining with the key a previous join left", "key", a.store.Location(credstore.KeyFile))
		return key, nil
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	if err := a.store.SaveKey(ctx, keyPEM); err != nil {
		return nil, err
	}
	return key, nil
}

// parseKey reads a PEM private key: PKCS#8, SEC 1 (EC) or PKCS#1 (RSA).
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a key of type %T cannot sign", key)
	}
	return signer, nil
}

// certificateRequest is a PEM CSR signed by key for the cluster's identity:
// CommonName cluster:<name> and nothing else.
func certificateRequest(key crypto.Signer, cluster string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader,
		&x509.CertificateRequest{Subject: pkix.Name{CommonName: protocol.ClusterCommonName(cluster)}}, key)
	if err != nil {
		return nil, fmt.Errorf("create the certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}
