package sharedfiles

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
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
	if err == nil || !strings.Contains(err.Error(), "belongs to another hub") || !strings.Contains(err.Error(), "pki") {
		t.Errorf("a foreign data directory: %v, want a refusal naming its pki", err)
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
				for _, p := range []string{"pki/ca.crt", "pki/ca.key"} {
					if err := writeFile(filepath.Join(loser, p), []byte("old "+p)); err != nil {
						t.Fatal(err)
					}
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

// TestRepairsAnInterruptedInstall: a replica that crashed while it took
// the shared files (its own CA certificate, the shared key) is repaired
// on its next start, and one whose CA certificate and key both differ is
// refused.
func TestRepairsAnInterruptedInstall(t *testing.T) {
	kv := openStore(t)
	first := t.TempDir()
	if err := Sync(t.Context(), kv, first, makeFiles(first, "first"), quiet()); err != nil {
		t.Fatal(err)
	}
	shared := mustRead(t, first)
	for _, tt := range []struct {
		name        string
		local       map[string]string
		wantRefusal bool
	}{
		{name: "own certificate, shared key", local: map[string]string{"pki/ca.crt": "mine", "pki/ca.key": string(shared["pki/ca.key"])}},
		{name: "shared certificate, own key", local: map[string]string{"pki/ca.crt": string(shared["pki/ca.crt"]), "pki/ca.key": "mine"}},
		{name: "own certificate only", local: map[string]string{"pki/ca.crt": "mine"}},
		{name: "own service-account key", local: map[string]string{"apiserver/service-account.key": "mine"}},
		{name: "own CA", local: map[string]string{"pki/ca.crt": "mine", "pki/ca.key": "mine too"}, wantRefusal: true},
		{name: "own agent certificate only", local: map[string]string{"pki/agent-ca.crt": "mine"}},
		{name: "own agent CA", local: map[string]string{"pki/agent-ca.crt": "mine", "pki/agent-ca.key": "mine too"}, wantRefusal: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, data := range tt.local {
				if err := writeFile(filepath.Join(dir, p), []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
			err := Sync(t.Context(), kv, dir, nil, quiet())
			if tt.wantRefusal {
				if err == nil {
					t.Fatal("a directory with a CA of its own took the shared files")
				}
				for p, data := range tt.local {
					if got := string(mustReadFile(t, dir, p)); got != data {
						t.Errorf("the refused directory's %s became %q", p, got)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(shared, mustRead(t, dir)); diff != "" {
				t.Errorf("not repaired (-shared +got):\n%s", diff)
			}
		})
	}
}

func mustReadFile(t *testing.T, dir, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOlderSetGetsNewFiles: a set stored by a version without the gossip
// key and the agent CA gets the first upgraded replica's, which every later replica takes;
// the CA and the other keys stay the stored ones.
func TestOlderSetGetsNewFiles(t *testing.T) {
	kv := openStore(t)
	old := map[string][]byte{}
	for _, p := range required {
		old[p] = []byte("old:" + p)
	}
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), Key, string(data)); err != nil {
		t.Fatal(err)
	}
	// The first upgraded replica had the old files in its data directory.
	first, second := t.TempDir(), t.TempDir()
	for p, content := range old {
		if err := writeFile(filepath.Join(first, p), content); err != nil {
			t.Fatal(err)
		}
	}
	if err := Sync(t.Context(), kv, first, makeFiles(first, "first"), quiet()); err != nil {
		t.Fatalf("first upgraded replica: %v", err)
	}
	if err := Sync(t.Context(), kv, second, makeFiles(second, "second"), quiet()); err != nil {
		t.Fatalf("second upgraded replica: %v", err)
	}
	want := map[string][]byte{}
	for _, p := range []string{"pki/gossip.key", "pki/agent-ca.crt", "pki/agent-ca.key"} {
		want[p] = []byte("first:" + p)
	}
	maps.Copy(want, old)
	for name, dir := range map[string]string{"first": first, "second": second} {
		if diff := cmp.Diff(want, mustRead(t, dir)); diff != "" {
			t.Errorf("%s replica's files (-want +got):\n%s", name, diff)
		}
	}
	stored, _, err := load(t.Context(), kv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored set (-want +got):\n%s", diff)
	}
}
