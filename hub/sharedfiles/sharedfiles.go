// Package sharedfiles keeps the files every hub replica must hold alike in
// the store they share: the CA (agents and API clients trust one CA
// whichever replica they reach), the ServiceAccount signing key (a token
// one replica signed is valid on all) and the QUIC stateless-reset key (a
// replica answers packets meant for another one with a reset).
//
// The first replica to start writes its files into etcd; every later one
// takes them from there into its own data directory. A replica whose data
// directory already holds a different CA refuses to start: replacing a CA
// silently would cut off every agent it signed.
package sharedfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/flotilla-io/flotilla/internal/atomicfile"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key is where the shared files live in etcd: beside kube-apiserver's
// /registry, outside the prefix the hub's old store used.
const Key = "/flotilla-hub/shared-files/v1"

// Paths are the shared files, relative to the data directory.
var Paths = []string{"pki/ca.crt", "pki/ca.key", "pki/stateless-reset.key", "apiserver/service-account.key"}

// Sync makes dataDir hold the same shared files as the other replicas on
// kv. When the store has none yet, create is called to make the local ones
// (it must create every missing file of Paths), and they become the shared
// copy, unless another replica stored its own first: then those replace the
// ones create just made. Files that were already in dataDir are never
// replaced.
func Sync(ctx context.Context, kv clientv3.KV, dataDir string, create func() error, logger *slog.Logger) error {
	stored, err := load(ctx, kv)
	if err != nil {
		return err
	}
	if stored != nil {
		return install(dataDir, stored, nil, logger)
	}
	existed, err := existing(dataDir)
	if err != nil {
		return err
	}
	if err := create(); err != nil {
		return err
	}
	local, err := read(dataDir)
	if err != nil {
		return err
	}
	data, err := json.Marshal(local)
	if err != nil {
		return fmt.Errorf("shared files: %w", err)
	}
	// Put only if no replica stored its files meanwhile.
	resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(Key), "=", 0)).
		Then(clientv3.OpPut(Key, string(data))).Else(clientv3.OpGet(Key)).Commit()
	if err != nil {
		return fmt.Errorf("store the shared files (CA, keys) in etcd: %w", err)
	}
	if resp.Succeeded {
		logger.Info("stored this hub's CA and keys for its replicas", "key", Key)
		return nil
	}
	winner, err := decode(resp.Responses[0].GetResponseRange().Kvs[0].Value)
	if err != nil {
		return err
	}
	return install(dataDir, winner, existed, logger)
}

func load(ctx context.Context, kv clientv3.KV) (map[string][]byte, error) {
	resp, err := kv.Get(ctx, Key)
	if err != nil {
		return nil, fmt.Errorf("read the hub replicas' shared files (CA, keys) from etcd: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return decode(resp.Kvs[0].Value)
}

func decode(data []byte) (map[string][]byte, error) {
	var files map[string][]byte
	if err := json.Unmarshal(data, &files); err != nil {
		return nil, fmt.Errorf("the hub replicas' shared files in etcd (%s): %w", Key, err)
	}
	for _, p := range Paths {
		if len(files[p]) == 0 {
			return nil, fmt.Errorf("the hub replicas' shared files in etcd (%s): %s is missing", Key, p)
		}
	}
	return files, nil
}

// existing says which of Paths are in dataDir already.
func existing(dataDir string) (map[string]bool, error) {
	found := map[string]bool{}
	for _, p := range Paths {
		_, err := os.Stat(filepath.Join(dataDir, p))
		switch {
		case err == nil:
			found[p] = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("shared file: %w", err)
		}
	}
	return found, nil
}

func read(dataDir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, p := range Paths {
		data, err := os.ReadFile(filepath.Join(dataDir, p))
		if err != nil {
			return nil, fmt.Errorf("shared file: %w", err)
		}
		files[p] = data
	}
	return files, nil
}

// install writes the shared files into dataDir. A data directory whose
// CA (certificate and key, both there before this start: existed, or all
// local files when existed is nil) differs from the shared one belongs to
// another hub and is refused; anything else that differs is what a start
// cut short left behind (a race's loser that crashed while installing)
// and is replaced.
func install(dataDir string, files map[string][]byte, existed map[string]bool, logger *slog.Logger) error {
	differs := map[string]bool{} // missing or different
	ownCA := 0                   // CA files there before this start, and different
	for _, p := range Paths {
		local, err := os.ReadFile(filepath.Join(dataDir, p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			differs[p] = true
		case err != nil:
			return fmt.Errorf("shared file: %w", err)
		case !bytes.Equal(local, files[p]):
			differs[p] = true
			if (p == "pki/ca.crt" || p == "pki/ca.key") && (existed == nil || existed[p]) {
				ownCA++
			}
		}
	}
	if ownCA == 2 {
		return fmt.Errorf("the CA in %s differs from the one the hub's other replicas share in etcd (%s): "+
			"this data directory belongs to another hub; start with an empty --data-dir, or move its pki/ aside", filepath.Join(dataDir, "pki"), Key)
	}
	var wrote []string
	for _, p := range Paths {
		if !differs[p] {
			continue
		}
		if err := writeFile(filepath.Join(dataDir, p), files[p]); err != nil {
			return err
		}
		wrote = append(wrote, p)
	}
	if len(wrote) > 0 {
		logger.Info("took the CA and keys the hub's replicas share from etcd", "files", wrote)
	}
	return nil
}

// writeFile writes atomically, mode 0600, creating its folder: a power cut
// must not leave an empty CA key.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("shared file: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("shared file: %w", err)
	}
	return nil
}
