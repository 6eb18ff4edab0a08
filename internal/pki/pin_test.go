package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestPinIsKubeadmsCAHash(t *testing.T) {
	ca, err := NewCA("pin", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// kubeadm hashes the DER SubjectPublicKeyInfo; recompute it from the
	// public key rather than the parsed certificate's raw field.
	spki, err := x509.MarshalPKIXPublicKey(ca.Cert.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(spki)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := Pin(ca.Cert); got != want {
		t.Fatalf("Pin = %s, want %s", got, want)
	}
	if !MatchesPin(ca.Cert, want) {
		t.Error("MatchesPin(own pin) = false")
	}
	other, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if MatchesPin(other.Cert, want) {
		t.Error("another CA matches the pin")
	}
}

func TestParsePin(t *testing.T) {
	good := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: good, want: good},
		{in: "sha256:" + strings.Repeat("AB", 32), want: good},
		{in: strings.Repeat("ab", 32), wantErr: true},           // no prefix
		{in: "sha1:" + strings.Repeat("ab", 20), wantErr: true}, // other hash
		{in: "sha256:" + strings.Repeat("ab", 31), wantErr: true},
		{in: "sha256:" + strings.Repeat("zz", 32), wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParsePin(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParsePin(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
