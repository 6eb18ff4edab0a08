package credstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/flotilla-io/flotilla/internal/atomicfile"
)

// dirStore keeps the credentials as files, mode 0600, in a directory
// (mode 0700, created when the first item is written). Each file is
// replaced atomically; a renewal is installed by renames in an order that
// settleRotation can finish after a crash.
type dirStore struct {
	dir string
	log *slog.Logger
}

// NewDir is the store in directory dir; log hears of a renewal it
// finishes.
func NewDir(dir string, log *slog.Logger) Store { return dirStore{dir: dir, log: log} }

func (s dirStore) Location(item string) string { return filepath.Join(s.dir, item) }

func (s dirStore) Absent(item string) error {
	return &fs.PathError{Op: "open", Path: s.Location(item), Err: syscall.ENOENT}
}

func (s dirStore) Load(context.Context) (Credentials, error) {
	var c Credentials
	for _, it := range c.items() {
		data, err := os.ReadFile(s.Location(it.name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return Credentials{}, fmt.Errorf("read %s: %w", it.name, err)
		default:
			*it.data = data
		}
	}
	settled, changed := settleRotation(c)
	if !changed {
		return c, nil
	}
	if err := s.persist(c, settled); err != nil {
		return Credentials{}, fmt.Errorf("finish the interrupted certificate renewal: %w", err)
	}
	s.log.Warn("finished a certificate renewal that was interrupted", "certDir", s.dir)
	return settled, nil
}

// persist turns the files from old into next: tls.key, then tls.crt, then
// the rotation files go. Each step leaves files settleRotation finishes.
func (s dirStore) persist(old, next Credentials) error {
	type change struct {
		name      string
		old, next []byte
	}
	for _, c := range []change{{KeyFile, old.Key, next.Key}, {CertFile, old.Cert, next.Cert}} {
		if !bytes.Equal(c.old, c.next) {
			if err := atomicfile.Write(s.Location(c.name), c.next, 0o600); err != nil {
				return err
			}
		}
	}
	for _, c := range []change{{NextKeyFile, old.NextKey, next.NextKey}, {NextCertFile, old.NextCert, next.NextCert}} {
		if c.old != nil && c.next == nil {
			if err := os.Remove(s.Location(c.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return atomicfile.SyncDir(s.dir)
}

func (s dirStore) SaveKey(_ context.Context, keyPEM []byte) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create the certificate directory: %w", err)
	}
	if err := atomicfile.Write(s.Location(KeyFile), keyPEM, 0o600); err != nil {
		return fmt.Errorf("write client key: %w", err)
	}
	return nil
}

func (s dirStore) SaveJoined(_ context.Context, caPEM, certPEM []byte) error {
	for _, f := range []struct {
		name string
		data []byte
	}{{CAFile, caPEM}, {CertFile, certPEM}} {
		if err := atomicfile.Write(s.Location(f.name), f.data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (s dirStore) SaveNextKey(_ context.Context, keyPEM []byte) error {
	return atomicfile.Write(s.Location(NextKeyFile), keyPEM, 0o600)
}

// installRenewed writes certPEM as tls.crt.next, then renames tls.key.next
// over tls.key and tls.crt.next over tls.crt. A crash between the renames
// leaves files settleRotation finishes.
func (s dirStore) InstallRenewed(_ context.Context, certPEM []byte) error {
	if err := atomicfile.Write(s.Location(NextCertFile), certPEM, 0o600); err != nil {
		return err
	}
	if err := os.Rename(s.Location(NextKeyFile), s.Location(KeyFile)); err != nil {
		return err
	}
	if err := os.Rename(s.Location(NextCertFile), s.Location(CertFile)); err != nil {
		return err
	}
	return atomicfile.SyncDir(s.dir)
}
