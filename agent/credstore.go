package agent

import (
	"context"
	"crypto/tls"

	"k8s.io/client-go/kubernetes"
)

// Items the agent keeps in its credential store: file names in
// Config.CertDir, keys of the Secret Config.CertSecret.
const (
	CAFile   = "ca.crt"  // PEM CA certificate(s) that signed the hub's certificate
	CertFile = "tls.crt" // PEM client certificate, CommonName "cluster:<name>"
	KeyFile  = "tls.key" // PEM private key of tls.crt
	// A rotation in progress: the new key, stored before the request is
	// sent, and (in a directory) the new certificate, written before both
	// are renamed over tls.key and tls.crt (key first).
	NextKeyFile  = "tls.key.next"
	NextCertFile = "tls.crt.next"
)

// credentials are the items of a credential store; nil means not stored.
type credentials struct {
	CA, Cert, Key, NextKey, NextCert []byte
}

// item is one credential by its name, for stores that keep them one item
// at a time.
type item struct {
	name string
	data *[]byte
}

// items lists the credentials by item name.
func (c *credentials) items() []item {
	return []item{{CAFile, &c.CA}, {CertFile, &c.Cert}, {KeyFile, &c.Key}, {NextKeyFile, &c.NextKey}, {NextCertFile, &c.NextCert}}
}

// complete says whether c holds what a session needs: ca.crt, tls.crt and
// tls.key.
func (c credentials) complete() bool { return c.CA != nil && c.Cert != nil && c.Key != nil }

// credentialStore keeps the agent's hub CA, client certificate and key,
// and the state of a certificate renewal, so that a restarted agent (or a
// newly elected one) finds them: a directory (out of a cluster) or a Secret
// in the agent's namespace (in one). Join, rotation and the TLS
// configuration use only this interface.
type credentialStore interface {
	// location names where an item is kept, for messages.
	location(item string) string
	// absent is the error that says an item is not stored.
	absent(item string) error
	// load reads every item (nil if not stored), after finishing a
	// renewal that a crash interrupted.
	load(ctx context.Context) (credentials, error)
	// saveKey stores a join's new key as tls.key, before the request is
	// sent.
	saveKey(ctx context.Context, keyPEM []byte) error
	// saveJoined stores the CA and the certificate a join got.
	saveJoined(ctx context.Context, caPEM, certPEM []byte) error
	// saveNextKey stores a renewal's new key as tls.key.next, before the
	// request is sent.
	saveNextKey(ctx context.Context, keyPEM []byte) error
	// installRenewed makes certPEM and tls.key.next the current pair.
	installRenewed(ctx context.Context, certPEM []byte) error
}

// newCredentialStore is the store cfg (with defaults) names: a Secret in the system
// namespace read and written with client, or a directory.
func newCredentialStore(cfg Config, client kubernetes.Interface) credentialStore {
	log := cfg.Logger.With("cluster", cfg.ClusterName)
	if cfg.CertSecret != "" {
		return &secretStore{client: client, namespace: cfg.SystemNamespace, name: cfg.CertSecret, log: log}
	}
	return dirStore{dir: cfg.CertDir, log: log}
}

// settleRotation finishes a renewal a crash interrupted: it returns c with
// tls.crt and tls.key the newest matching pair among tls.crt.next,
// tls.crt, tls.key and tls.key.next, and whether that changed anything.
// A renewal still waiting for its answer keeps its tls.key.next; one that
// is over leaves no rotation item.
func settleRotation(c credentials) (credentials, bool) {
	if c.NextCert == nil && c.NextKey == nil {
		return c, false
	}
	matches := func(certPEM, keyPEM []byte) bool {
		if certPEM == nil || keyPEM == nil {
			return false
		}
		_, err := tls.X509KeyPair(certPEM, keyPEM)
		return err == nil
	}
	next := c
	switch {
	case matches(c.NextCert, c.Key): // crashed between the renames
		next.Cert, next.NextCert = c.NextCert, nil
	case matches(c.NextCert, c.NextKey): // crashed before the renames
		next.Key, next.Cert, next.NextKey, next.NextCert = c.NextKey, c.NextCert, nil, nil
	case matches(c.Cert, c.Key): // no answer yet: keep the current pair
		return c, false
	case matches(c.Cert, c.NextKey):
		next.Key, next.NextKey = c.NextKey, nil
	default:
		return c, false // loading tls.crt and tls.key says what is wrong
	}
	return next, true
}
