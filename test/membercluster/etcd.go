package membercluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/process"
)

// sharedEtcd is the one etcd every member cluster stores its data in, each
// under its own --etcd-prefix.
type sharedEtcd struct {
	proc      *process.Process
	clientURL string
	ports     []int
}

func startEtcd(ctx context.Context, binDir, dir string) (*sharedEtcd, error) {
	e := &sharedEtcd{}
	configure := func() (*process.Process, error) {
		clientPort, err := freeport.TCP()
		if err != nil {
			return nil, err
		}
		peerPort, err := freeport.TCP()
		if err != nil {
			return nil, err
		}
		e.clientURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
		e.ports = []int{clientPort, peerPort}
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
		return &process.Process{
			Name:   "etcd",
			Binary: filepath.Join(binDir, "etcd"),
			Args: []string{
				"--name=members",
				"--data-dir=" + filepath.Join(dir, "etcd"),
				"--listen-client-urls=" + e.clientURL,
				"--advertise-client-urls=" + e.clientURL,
				"--listen-peer-urls=" + peerURL,
				"--initial-advertise-peer-urls=" + peerURL,
				"--initial-cluster=members=" + peerURL,
				// Test data need not survive a power cut; fsync dominates latency on small disks.
				"--unsafe-no-fsync",
				// A lone member has no peers to wait for: with raft's short timers it
				// elects itself in ~0.1 s instead of 0.5-1 s.
				"--heartbeat-interval=10",
				"--election-timeout=100",
				"--log-level=warn",
			},
			LogPath: filepath.Join(dir, "etcd.log"),
		}, nil
	}
	proc, err := startReady(ctx, configure, e.healthy)
	if err != nil {
		return nil, fmt.Errorf("start shared etcd: %w", err)
	}
	e.proc = proc
	return e, nil
}

// healthy asks etcd's /health endpoint.
func (e *sharedEtcd) healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.clientURL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd health: %s %s", resp.Status, body)
	}
	return nil
}
