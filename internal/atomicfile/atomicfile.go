// Package atomicfile replaces files whole or not at all, for keys,
// certificates and kubeconfigs: a crash or a power cut leaves the old file
// or the new one, never a part or an empty file, and the new one has its
// mode from the start, so a key is never readable by others even for a
// moment. The write itself is renameio's (temporary file beside the
// target, fsync, rename); the directory is synced after the rename so the
// rename survives a power cut too.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write replaces path with data, with mode perm (whatever mode an older
// file had), and returns once file and rename are on disk.
func Write(path string, data []byte, perm os.FileMode) error {
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(perm))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer f.Cleanup()
	// The umask applies at creation: set the mode exactly.
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes the renames and removals in dir durable. File systems that
// cannot sync a directory (EINVAL) are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !isUnsupported(err) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
