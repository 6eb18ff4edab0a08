package sharedfiles

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/flotilla-io/flotilla/store"
)

func openStore(t *testing.T) *clientv3.Client {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Client()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// makeFiles returns a create function writing every shared file with
// contents marked by tag, unless the file exists.
func makeFiles(dataDir, tag string) func() error {
	return func() error {
		for _, p := range Paths {
			path := filepath.Join(dataDir, p)
			if _, err := os.Stat(path); err == nil {
				continue
			}
			if err := writeFile(path, []byte(tag+":"+p)); err != nil {
				return err
			}
		}
		return nil
	}
}

func mustRead(t *testing.T, dataDir string) map[string][]byte {
	t.Helper()
	files, err := read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestReplicasShareFiles: the first replica's files go into etcd, the
// second takes them, and a data directory of another hub is refused
// without a file changed.
func TestReplicasShareFiles(t *testing.T) {
	kv := openStore(t)
	first, second, foreign := t.TempDir(), t.TempDir(), t.TempDir()
	if err := Sync(t.Context(), kv, first, makeFiles(first, "first"), quiet()); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if err := Sync(t.Context(), kv, second, func() error { t.Error("the second replica made its own files"); return nil }, quiet()); err != nil {
		t.Fatalf("second replica: %v", err)
	}
	if diff := cmp.Diff(mustRead(t, first), mustRead(t, second)); diff != "" {
		t.Errorf("the replicas' files differ (-first +second):\n%s", diff)
	}
	// Restarting the first replica changes nothing.
	if err := Sync(t.Context(), kv, first, nil, quiet()); err != nil {
		t.Fatalf("first replica again: %v", err)
	}

	if err := makeFiles(foreign, "foreign")(); err != nil {
		t.Fatal(err)
	}
	err := Sync(t.Context(), kv, foreign, nil, quiet())
	if err == nil || !strings.Contains(err.Error(), "differs from the copy") || !strings.Contains(err.Error(), "pki/ca.crt") {
		t.Errorf("a foreign data directory: %v, want a refusal naming pki/ca.crt", err)
	}
	if got := string(mustRead(t, foreign)["pki/ca.key"]); got != "foreign:pki/ca.key" {
		t.Errorf("the refused directory's CA key became %q", got)
	}
}

// TestLoserTakesWinnersFiles: two replicas starting together both make
// files; the one whose put comes second replaces what it made with the
// stored ones, but a file it had before is never replaced.
func TestLoserTakesWinnersFiles(t *testing.T) {
	for _, tt := range []struct {
		name        string
		hadCA       bool
		wantRefusal bool
	}{
		{name: "fresh data directory"},
		{name: "its own CA from before", hadCA: true, wantRefusal: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kv := openStore(t)
			winner, loser := t.TempDir(), t.TempDir()
			if tt.hadCA {
				if err := writeFile(filepath.Join(loser, "pki/ca.crt"), []byte("old CA")); err != nil {
					t.Fatal(err)
				}
			}
			create := func() error {
				// The winner stores its files while the loser makes its own.
				if err := Sync(context.WithoutCancel(t.Context()), kv, winner, makeFiles(winner, "winner"), quiet()); err != nil {
					t.Fatalf("winner: %v", err)
				}
				return makeFiles(loser, "loser")()
			}
			err := Sync(t.Context(), kv, loser, create, quiet())
			if tt.wantRefusal {
				if err == nil {
					t.Fatal("a loser with a CA of its own took the winner's files")
				}
				return
			}
			if err != nil {
				t.Fatalf("loser: %v", err)
			}
			if diff := cmp.Diff(mustRead(t, winner), mustRead(t, loser)); diff != "" {
				t.Errorf("the loser kept its own files (-winner +loser):\n%s", diff)
			}
		})
	}
}

func TestCorruptStoredFilesAreRefused(t *testing.T) {
	kv := openStore(t)
	for _, value := range []string{"not json", `{"pki/ca.crt":"eA=="}`} {
		if _, err := kv.Put(t.Context(), Key, value); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := Sync(t.Context(), kv, dir, nil, quiet()); err == nil || !strings.Contains(err.Error(), Key) {
			t.Errorf("stored %q: %v, want an error naming %s", value, err, Key)
		}
	}
}
