package store

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// The embedded etcd's peer listener must be a socket file in its own
// folder: as an abstract socket, its close tried to remove a file in the
// working directory, failed on a read-only root and left etcd's Close
// waiting forever. The data dir opens again after the close.
func TestEmbeddedSocketsAreFilesInTheDataDir(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, round := range []string{"first start", "restart"} {
		s, err := Open(t.Context(), Config{DataDir: dir, Logger: logger})
		if err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		for _, name := range []string{"peer.sock", "client.sock"} {
			info, err := os.Stat(filepath.Join(dir, "etcd", name))
			if err != nil || info.Mode()&os.ModeSocket == 0 {
				t.Errorf("%s: %s: %v (mode %v), want a socket file", round, name, err, modeOf(info))
			}
		}
		if _, err := s.Client().Put(t.Context(), "/health", round); err != nil {
			t.Errorf("%s: put: %v", round, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: close: %v", round, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "etcd", "peer.sock")); !os.IsNotExist(err) {
			t.Errorf("%s: the peer socket after the close: %v, want it removed", round, err)
		}
	}
}

func modeOf(info os.FileInfo) os.FileMode {
	if info == nil {
		return 0
	}
	return info.Mode()
}
