// Package sharedfiles keeps the files every hub replica must hold alike in
// the store they share: the hub CA (agents and API clients trust one CA
// whichever replica they reach), the agent CA (an agent certificate one
// replica signed opens sessions on all), the ServiceAccount signing key (a token
// one replica signed is valid on all), the QUIC stateless-reset key (a
// replica answers packets meant for another one with a reset) and the
// gossip key (only the hub's replicas join their gossip).
//
// The first replica to start writes its files into etcd; every later one
// takes them from there into its own data directory. A replica whose data
// directory already holds a different CA refuses to start: replacing a CA
// silently would cut off every agent it signed. A file added to Paths by a
// later version is added to the stored set by the first replica of that
// version, the same way.
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
var Paths = []string{"pki/ca.crt", "pki/ca.key", "pki/stateless-reset.key", "apiserver/service-account.key", "pki/gossip.key",
	"pki/agent-ca.crt", "pki/agent-ca.key"}

// caPairs are the certificates and keys of the CAs: a replica never
// replaces one it already held (see install).
var caPairs = [][2]string{{"pki/ca.crt", "pki/ca.key"}, {"pki/agent-ca.crt", "pki/agent-ca.key"}}

// required are the files a stored set must hold whatever version stored
// it; the others of Paths are added when missing (see addMissing).
var required = []string{"pki/ca.crt", "pki/ca.key", "pki/stateless-reset.key", "apiserver/service-account.key"}

// Sync makes dataDir hold the same shared files as the other replicas on
// kv. When the store has none yet, create is called to make the local ones
// (it must create every missing file of Paths), and they become the shared
// copy, unless another replica stored its own first: then those replace the
// ones create just made. Files that were already in dataDir are never
// replaced. A stored set without a file of Paths gets this replica's.
func Sync(ctx context.Context, kv clientv3.KV, dataDir string, create func() error, logger *slog.Logger) error {
	existed, err := existing(dataDir)
	if err != nil {
		return err
	}
	stored, revision, err := load(ctx, kv)
	if err != nil {
		return err
	}
	if stored == nil {
		if stored, revision, err = storeLocal(ctx, kv, dataDir, create, logger); err != nil || stored == nil {
			return err // nil, nil: this replica's files are the shared ones
		}
	}
	if len(missingFrom(stored)) > 0 {
		if err := create(); err != nil {
			return err
		}
		if stored, err = addMissing(ctx, kv, dataDir, stored, revision, logger); err != nil {
			return err
		}
	}
	return install(dataDir, stored, existed, logger)
}

// storeLocal creates the local files and stores them as the shared set if
// no replica stored its own meanwhile; otherwise it returns that replica's
// set and revision.
func storeLocal(ctx context.Context, kv clientv3.KV, dataDir string, create func() error, logger *slog.Logger) (map[string][]byte, int64, error) {
	if err := create(); err != nil {
		return nil, 0, err
	}
	local, err := read(dataDir)
	if err != nil {
		return nil, 0, err
	}
	data, err := json.Marshal(local)
	if err != nil {
		return nil, 0, fmt.Errorf("shared files: %w", err)
	}
	resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(Key), "=", 0)).
		Then(clientv3.OpPut(Key, string(data))).Else(clientv3.OpGet(Key)).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("store the shared files (CA, keys) in etcd: %w", err)
	}
	if resp.Succeeded {
		logger.Info("stored this hub's CA and keys for its replicas", "key", Key)
		return nil, 0, nil
	}
	winner := resp.Responses[0].GetResponseRange().Kvs[0]
	files, err := decode(winner.Value)
	return files, winner.ModRevision, err
}

// load reads the stored files and the key's revision; nil files when
// there are none yet.
func load(ctx context.Context, kv clientv3.KV) (map[string][]byte, int64, error) {
	resp, err := kv.Get(ctx, Key)
	if err != nil {
		return nil, 0, fmt.Errorf("read the hub replicas' shared files (CA, keys) from etcd: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	files, err := decode(resp.Kvs[0].Value)
	return files, resp.Kvs[0].ModRevision, err
}

func decode(data []byte) (map[string][]byte, error) {
	var files map[string][]byte
	if err := json.Unmarshal(data, &files); err != nil {
		return nil, fmt.Errorf("the hub replicas' shared files in etcd (%s): %w", Key, err)
	}
	for _, p := range required {
		if len(files[p]) == 0 {
			return nil, fmt.Errorf("the hub replicas' shared files in etcd (%s): %s is missing", Key, p)
		}
	}
	return files, nil
}

// missingFrom lists the files of Paths the stored set lacks: it was
// stored by an older version.
func missingFrom(files map[string][]byte) []string {
	var missing []string
	for _, p := range Paths {
		if len(files[p]) == 0 {
			missing = append(missing, p)
		}
	}
	return missing
}

// addMissing adds to the stored set, at revision, the files it lacks,
// taken from dataDir, unless another replica changed the set meanwhile:
// then the set is read again and completed in turn. It returns the set as
// stored.
func addMissing(ctx context.Context, kv clientv3.KV, dataDir string, stored map[string][]byte, revision int64,
	logger *slog.Logger) (map[string][]byte, error) {
	local, err := read(dataDir)
	if err != nil {
		return nil, err
	}
	for range 10 {
		missing := missingFrom(stored)
		if len(missing) == 0 {
			return stored, nil
		}
		for _, p := range missing {
			stored[p] = local[p]
		}
		data, err := json.Marshal(stored)
		if err != nil {
			return nil, fmt.Errorf("shared files: %w", err)
		}
		resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(Key), "=", revision)).
			Then(clientv3.OpPut(Key, string(data))).Commit()
		if err != nil {
			return nil, fmt.Errorf("add %v to the shared files in etcd: %w", missing, err)
		}
		if resp.Succeeded {
			logger.Info("added files this version shares to the hub replicas' shared files", "files", missing, "key", Key)
			return stored, nil
		}
		if stored, revision, err = load(ctx, kv); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("add files to the shared files in etcd (%s): it kept changing", Key)
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
	ownCA := map[string]bool{}   // CA files there before this start, and different
	for _, p := range Paths {
		local, err := os.ReadFile(filepath.Join(dataDir, p))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			differs[p] = true
		case err != nil:
			return fmt.Errorf("shared file: %w", err)
		case !bytes.Equal(local, files[p]):
			differs[p] = true
			ownCA[p] = existed == nil || existed[p]
		}
	}
	for _, pair := range caPairs {
		if ownCA[pair[0]] && ownCA[pair[1]] {
			return fmt.Errorf("the CA in %s (%s) differs from the one the hub's other replicas share in etcd (%s): "+
				"this data directory belongs to another hub; start with an empty --data-dir, or move its pki/ aside",
				filepath.Join(dataDir, "pki"), filepath.Base(pair[0]), Key)
		}
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
