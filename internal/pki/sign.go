package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// minRSABits is the smallest RSA key SignClient accepts.
const minRSABits = 2048

// CheckPublicKey accepts the keys Flotilla signs for: ECDSA on P-256 or
// P-384, RSA of at least 2048 bits, Ed25519.
func CheckPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("ECDSA key on %s: want P-256 or P-384", k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key of %d bits: want at least %d", k.N.BitLen(), minRSABits)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("key of type %T: want ECDSA, RSA or Ed25519", pub)
	}
	return nil
}

// SignClient signs a client certificate for someone else's key, pub, with
// commonName as its only subject (no organisation: to the hub's API
// server an organisation is a group) and no other name. notBefore is
// back-dated for clock skew, by a tenth of validFor at most: agents renew
// at 80 % of NotBefore→NotAfter, which a short certificate's back-dating
// must not use up. It returns the certificate (PEM) and its
// serial.
func (ca *CA) SignClient(pub crypto.PublicKey, commonName string, validFor time.Duration, now time.Time) ([]byte, *big.Int, error) {
	if err := CheckPublicKey(pub); err != nil {
		return nil, nil, err
	}
	if commonName == "" || validFor <= 0 {
		return nil, nil, fmt.Errorf("sign client certificate %q for %v: want a common name and a positive validity", commonName, validFor)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-min(clockSkewAllowance, validFor/10)),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign client certificate %q: %w", commonName, err)
	}
	return encodeCert(der), serial, nil
}
