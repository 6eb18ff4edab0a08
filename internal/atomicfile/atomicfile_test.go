package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		old     []byte // nil: no file before
		oldMode os.FileMode
		mode    os.FileMode
		umask   int
	}{
		{name: "new key", mode: 0o600},
		{name: "new file under a wide umask", mode: 0o644, umask: 0o077},
		{name: "replaces a world-readable key with a private one", old: []byte("old"), oldMode: 0o644, mode: 0o600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tls.key")
			if tc.old != nil {
				if err := os.WriteFile(path, tc.old, tc.oldMode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.oldMode); err != nil {
					t.Fatal(err)
				}
			}
			old := syscall.Umask(tc.umask)
			err := Write(path, []byte("new"), tc.mode)
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Fatalf("read %q, %v; want new", got, err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != tc.mode {
				t.Errorf("mode %v, want %v", info.Mode().Perm(), tc.mode)
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Errorf("directory holds %v (%v), want only tls.key: no temporary file left", entries, err)
			}
		})
	}
}

func TestWriteIntoMissingDirectory(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "absent", "ca.key"), []byte("x"), 0o600)
	if err == nil {
		t.Fatal("wrote into a directory that does not exist")
	}
}
