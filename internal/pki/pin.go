package pki

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
)

// pinPrefix names the hash of a pin, as kubeadm's
// --discovery-token-ca-cert-hash does.
const pinPrefix = "sha256:"

// Pin is how a joining agent names the hub CA before it trusts anything:
// "sha256:" and the hex SHA-256 of the certificate's DER
// SubjectPublicKeyInfo, the format of kubeadm join's CA hash (so
// `openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256sum`
// computes it too).
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return pinPrefix + hex.EncodeToString(sum[:])
}

// ParsePin checks a pin's form ("sha256:" and 64 hex digits, either case)
// and returns it in the canonical lower-case form.
func ParsePin(pin string) (string, error) {
	digest, ok := strings.CutPrefix(pin, pinPrefix)
	if !ok {
		return "", fmt.Errorf("CA pin %q: want sha256:<64 hex digits>", pin)
	}
	raw, err := hex.DecodeString(digest)
	if err != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("CA pin %q: want sha256:<64 hex digits>", pin)
	}
	return pinPrefix + hex.EncodeToString(raw), nil
}

// MatchesPin reports whether cert's public key is the one pin names (pin in
// canonical form, see ParsePin).
func MatchesPin(cert *x509.Certificate, pin string) bool {
	return subtle.ConstantTimeCompare([]byte(Pin(cert)), []byte(pin)) == 1
}
