// Package credstore keeps the agent's credentials: the CA that signed the
// hub's certificate, the agent's client certificate and key, and the state
// of a certificate renewal, so that a restarted agent (or a newly elected
// one) finds them. A [Store] is a directory ([NewDir], out of a cluster)
// or a Secret of the member cluster ([NewSecret], in one); either finishes,
// when it loads, a renewal that a crash interrupted.
package credstore

import (
	"context"
	"crypto/tls"
)

// Items the agent keeps in its credential store: file names in a
// directory, data keys of a Secret.
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

// Credentials are the items of a credential store; nil means not stored.
type Credentials struct {
	CA, Cert, Key, NextKey, NextCert []byte
}

// item is one credential by its name, for stores that keep them one item
// at a time.
type item struct {
	name string
	data *[]byte
}

// items lists the credentials by item name.
func (c *Credentials) items() []item {
	return []item{{CAFile, &c.CA}, {CertFile, &c.Cert}, {KeyFile, &c.Key}, {NextKeyFile, &c.NextKey}, {NextCertFile, &c.NextCert}}
}

// Complete says whether c holds what a session needs: ca.crt, tls.crt and
// tls.key.
func (c Credentials) Complete() bool { return c.CA != nil && c.Cert != nil && c.Key != nil }

// Store keeps the agent's credentials, in a directory or a Secret. Join,
// rotation and the TLS configuration use only this interface.
type Store interface {
	// Location names where an item is kept, for messages.
	Location(item string) string
	// Absent is the error that says an item is not stored.
	Absent(item string) error
	// Load reads every item (nil if not stored), after finishing a
	// renewal that a crash interrupted.
	Load(ctx context.Context) (Credentials, error)
	// SaveKey stores a join's new key as tls.key, before the request is
	// sent.
	SaveKey(ctx context.Context, keyPEM []byte) error
	// SaveJoined stores the CA and the certificate a join got.
	SaveJoined(ctx context.Context, caPEM, certPEM []byte) error
	// SaveNextKey stores a renewal's new key as tls.key.next, before the
	// request is sent.
	SaveNextKey(ctx context.Context, keyPEM []byte) error
	// InstallRenewed makes certPEM and tls.key.next the current pair.
	InstallRenewed(ctx context.Context, certPEM []byte) error
}

// settleRotation finishes a renewal a crash interrupted: it returns c with
// tls.crt and tls.key the newest matching pair among tls.crt.next,
// tls.crt, tls.key and tls.key.next, and whether that changed anything.
// A renewal still waiting for its answer keeps its tls.key.next; one that
// is over leaves no rotation item.
func settleRotation(c Credentials) (Credentials, bool) {
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
