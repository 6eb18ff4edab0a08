// Package pki makes the small certificate authorities Flotilla needs: a CA that
// signs serving and client certificates, with ECDSA P-256 keys, written as PEM.
// The member test clusters use it for their API servers and admin users; the hub
// uses the same code for the CA that signs agent identities.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// CA is a certificate authority held in memory.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Usage says what a leaf certificate is for.
type Usage int

const (
	// ServerAuth is a TLS serving certificate.
	ServerAuth Usage = iota
	// ClientAuth is a TLS client certificate.
	ClientAuth
)

// Request describes a leaf certificate to issue.
type Request struct {
	CommonName   string
	Organization []string // Kubernetes reads these as groups, e.g. system:masters.
	DNSNames     []string
	IPAddresses  []net.IP
	Usage        Usage
	ValidFor     time.Duration
}

// KeyPair is a PEM-encoded certificate and its private key.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// clockSkewAllowance back-dates NotBefore so peers with a slightly slow clock
// accept a certificate issued a moment ago.
const clockSkewAllowance = 5 * time.Minute

// NewCA creates a self-signed CA valid for validFor from now.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkewAllowance),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA %q: %w", commonName, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue signs a new leaf certificate with a fresh key.
func (ca *CA) Issue(req Request) (*KeyPair, error) {
	if req.CommonName == "" {
		return nil, errors.New("issue certificate: empty common name")
	}
	if req.ValidFor <= 0 {
		return nil, fmt.Errorf("issue certificate %q: validity %v is not positive", req.CommonName, req.ValidFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %q: %w", req.CommonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	extUsage := x509.ExtKeyUsageServerAuth
	if req.Usage == ClientAuth {
		extUsage = x509.ExtKeyUsageClientAuth
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
		NotBefore:    now.Add(-clockSkewAllowance),
		NotAfter:     now.Add(req.ValidFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{extUsage},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", req.CommonName, err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// Certificate parses the key pair's certificate.
func (kp *KeyPair) Certificate() (*x509.Certificate, error) {
	block, _ := pem.Decode(kp.CertPEM)
	if block == nil {
		return nil, errors.New("key pair: certificate is not PEM")
	}
	return x509.ParseCertificate(block.Bytes)
}

// TLSCertificate returns the key pair as a certificate to serve or present
// over TLS.
func (kp *KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
}

// CertPEM returns the CA certificate as PEM.
func (ca *CA) CertPEM() []byte { return encodeCert(ca.Cert.Raw) }

// KeyPEM returns the CA key as PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return EncodeKey(ca.Key) }

// NewKey generates a standalone ECDSA P-256 key, e.g. for service-account tokens.
func NewKey() (crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return key, nil
}

// EncodeKey encodes a private key as PKCS#8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublicKey encodes the public half of key as PKIX PEM.
func EncodePublicKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// LoadCA reads a CA from a PEM certificate file and a PKCS#8 PEM key file.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: certificate %q is not a CA", certFile, cert.Subject.CommonName)
	}
	keyBlock, _ := pem.Decode(keyPEM)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PEM PRIVATE KEY block", keyFile)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	signer, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: key of type %T cannot sign", keyFile, parsed)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}
