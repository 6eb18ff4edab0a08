package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestSignClient(t *testing.T) {
	ca, err := NewCA("sign", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	certPEM, serial, err := ca.SignClient(key.Public(), "cluster:edge-1", 2*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify: %v", err)
	}
	if cert.Subject.CommonName != "cluster:edge-1" || len(cert.Subject.Organization) != 0 || len(cert.DNSNames)+len(cert.IPAddresses) != 0 {
		t.Errorf("subject %v, names %v %v: want the common name alone", cert.Subject, cert.DNSNames, cert.IPAddresses)
	}
	if cert.SerialNumber.Cmp(serial) != 0 || !cert.NotAfter.Equal(now.Add(2*time.Hour).Truncate(time.Second)) {
		t.Errorf("serial %v (returned %v), notAfter %v", cert.SerialNumber, serial, cert.NotAfter)
	}
}

func TestSignClientRefusesWeakKeys(t *testing.T) {
	ca, err := NewCA("sign", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, pub := range map[string]any{"RSA-1024": &small.PublicKey, "P-224": &p224.PublicKey, "not a key": "x"} {
		if _, _, err := ca.SignClient(pub, "cluster:a", time.Hour, time.Now()); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
}
