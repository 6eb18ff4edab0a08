// Package store is the etcd under the hub's Kubernetes API server: by
// default a single-member etcd embedded in the data directory, listening
// only on a unix socket there (nothing to install, no port to collide on);
// with endpoints, an external etcd cluster, over TLS if asked. The API
// server reaches either through Endpoints, so everything above Open is one
// code path.
package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Config says where the store lives.
type Config struct {
	// DataDir holds the embedded etcd (in DataDir/etcd) when Endpoints is empty.
	DataDir string
	// Endpoints of an external etcd cluster; empty means embedded.
	Endpoints []string
	// TLS secures the connection to an external etcd.
	TLS TLSFiles
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Quota is the embedded etcd's backend quota in bytes (0:
	// DefaultQuota).
	Quota int64
}

// MaxRequestBytes is the largest request the embedded etcd accepts (etcd's
// default is 1.5 MiB): a Work carries whole manifests.
const MaxRequestBytes = 20 << 20

const (
	embeddedStartTimeout = time.Minute
	dialTimeout          = 5 * time.Second
	// embeddedCompactionRetention keeps ten minutes of history; the API
	// server compacts on its own too (every five minutes).
	embeddedCompactionRetention = "10m"
)

// TLSFiles are PEM files for an external etcd: CAFile verifies its
// servers; CertFile and KeyFile are this client's certificate.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

func (f TLSFiles) config() (*tls.Config, error) {
	if f == (TLSFiles{}) {
		return nil, nil
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("etcd client certificate: give both --etcd-certfile and --etcd-keyfile")
	}
	info := transport.TLSInfo{TrustedCAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: %w", err)
	}
	return cfg, nil
}

// Store is an open connection to etcd.
type Store struct {
	client   *clientv3.Client
	embedded *embed.Etcd
	// endpoints are the client URLs other etcd clients in this process (the
	// embedded API server) dial.
	endpoints []string
	logger    *slog.Logger
}

// Open starts the embedded etcd or connects to the external one.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s := &Store{logger: cfg.Logger}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if len(cfg.Endpoints) > 0 {
		tlsConfig, err := cfg.TLS.config()
		if err != nil {
			return nil, err
		}
		client, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: dialTimeout, Context: ctx, TLS: tlsConfig})
		if err != nil {
			return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
		}
		s.client = client
		if _, err := client.Status(ctx, cfg.Endpoints[0]); err != nil {
			client.Close()
			return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
		}
		s.endpoints = cfg.Endpoints
		s.logger.Info("store: using external etcd", "endpoints", cfg.Endpoints)
		return s, nil
	}
	if cfg.DataDir == "" {
		return nil, errors.New("open store: neither a data directory nor etcd endpoints given")
	}
	e, err := startEmbedded(ctx, filepath.Join(cfg.DataDir, "etcd"), cfg.Quota)
	if err != nil {
		return nil, err
	}
	s.embedded = e
	for _, u := range e.Config().ListenClientUrls {
		s.endpoints = append(s.endpoints, u.String())
	}
	s.client = v3client.New(e.Server)
	s.logger.Info("store: embedded etcd ready", "dir", e.Config().Dir)
	return s, nil
}

// startEmbedded starts a single-member etcd that listens only on unix
// sockets in its own folder: the hub talks to it in-process, and several
// hubs on one machine never collide on ports.
func startEmbedded(ctx context.Context, dir string, quota int64) (*embed.Etcd, error) {
	dir, err := filepath.Abs(dir) // socket URLs must not be relative
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "flotilla-hub"
	cfg.Dir = dir
	peer := url.URL{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}
	client := url.URL{Scheme: "unix", Path: filepath.Join(dir, "client.sock")}
	// etcd listens for peers on the URL's host alone (for clients, host and
	// path): the path in the host makes the peer socket a file here. With
	// an empty host it was an abstract socket whose close tried to remove
	// a file of its name in the working directory, which fails on a
	// read-only root (a pod's): the listener stayed open and etcd's Close
	// hung until the process was killed. The advertised URL keeps the form
	// existing members recorded.
	listenPeer := url.URL{Scheme: "unix", Host: peer.Path}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{listenPeer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = embeddedCompactionRetention
	// An apply request may carry up to 16 MiB of templates in one
	// transaction; etcd's default limit is 1.5 MiB.
	cfg.MaxRequestBytes = MaxRequestBytes
	cfg.QuotaBackendBytes = quota
	if quota <= 0 {
		cfg.QuotaBackendBytes = DefaultQuota
	}
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// Stale sockets from a crashed run would make the listeners fail.
	for _, sock := range []string{peer.Path, client.Path} {
		_ = os.Remove(sock)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", dir, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: %w", dir, ctx.Err())
	case <-time.After(embeddedStartTimeout):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s not ready after %v", dir, embeddedStartTimeout)
	}
}

// Endpoints are the etcd client URLs: the embedded etcd's unix socket, or
// the external cluster's endpoints.
func (s *Store) Endpoints() []string { return s.endpoints }

// Client returns the underlying etcd client, for leader election.
func (s *Store) Client() *clientv3.Client { return s.client }

// Close closes the client and stops the embedded etcd, if any.
func (s *Store) Close() error {
	err := s.client.Close()
	if s.embedded != nil {
		// The in-process client reports its own cancellation on close.
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		s.embedded.Close()
	}
	return err
}
