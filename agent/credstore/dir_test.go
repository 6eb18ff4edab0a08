package credstore

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/protocol"
)

// discard is a logger for tests that do not look at logs.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRecoverRotation: loading a directory that a crash left in the middle
// of a renewal installs the newest matching pair and leaves only the
// rotation files a renewal still waiting for its answer needs.
func TestRecoverRotation(t *testing.T) {
	ca, err := pki.NewCA("flotilla credstore test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func() *pki.KeyPair {
		kp, err := ca.Issue(pki.Request{CommonName: protocol.ClusterCommonName("member-1"), Usage: pki.ClientAuth, ValidFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	old, renewed := issue(), issue()
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		want  *pki.KeyPair
		left  []string // rotation files that stay
	}{
		{name: "no rotation", files: map[string][]byte{CertFile: old.CertPEM, KeyFile: old.KeyPEM}, want: old},
		{name: "no answer yet", files: map[string][]byte{CertFile: old.CertPEM, KeyFile: old.KeyPEM, NextKeyFile: renewed.KeyPEM},
			want: old, left: []string{NextKeyFile}},
		{name: "crash before the renames",
			files: map[string][]byte{CertFile: old.CertPEM, KeyFile: old.KeyPEM, NextKeyFile: renewed.KeyPEM, NextCertFile: renewed.CertPEM},
			want:  renewed},
		{name: "crash between the renames",
			files: map[string][]byte{CertFile: old.CertPEM, KeyFile: renewed.KeyPEM, NextCertFile: renewed.CertPEM},
			want:  renewed},
		{name: "certificate renamed, key not",
			files: map[string][]byte{CertFile: renewed.CertPEM, KeyFile: old.KeyPEM, NextKeyFile: renewed.KeyPEM},
			want:  renewed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, CAFile), ca.CertPEM())
			for name, data := range tc.files {
				writeFile(t, filepath.Join(dir, name), data)
			}
			store := NewDir(dir, discard)
			if _, err := store.Load(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, dir, CertFile), tc.want.CertPEM) || !bytes.Equal(readFile(t, dir, KeyFile), tc.want.KeyPEM) {
				t.Error("tls.crt and tls.key are not the expected pair")
			}
			for _, name := range []string{NextKeyFile, NextCertFile} {
				_, err := os.Stat(filepath.Join(dir, name))
				if left := strings.Contains(strings.Join(tc.left, ","), name); left == os.IsNotExist(err) {
					t.Errorf("%s: left %v, want %v", name, !os.IsNotExist(err), left)
				}
			}
			// What the next start loads is complete and a matching pair.
			c, err := store.Load(t.Context())
			if err != nil {
				t.Fatalf("load after recovery: %v", err)
			}
			if !c.Complete() {
				t.Error("load after recovery: the credentials are not complete")
			}
			if _, err := tls.X509KeyPair(c.Cert, c.Key); err != nil {
				t.Errorf("load after recovery: %v", err)
			}
		})
	}
}
