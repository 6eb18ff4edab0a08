package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
)

// certValidity is long enough for any run.
const certValidity = 24 * time.Hour

// readyFile is written into the server's folder once it serves and (for
// the CRD servers) the CRDs are established.
const readyFile = "ready"

// serve is the child process: it runs one server until killed.
func serve(ctx context.Context, kind serverKind, dir, etcdURL string) error {
	// Warnings and errors go to the server's log file.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	apiserver.RouteKlog(logger)
	ready := func() error { return os.WriteFile(filepath.Join(dir, readyFile), nil, 0o600) }
	switch kind {
	case crdJSON, crdCBOR:
		return serveCRD(ctx, dir, etcdURL, kind == crdCBOR, logger, ready)
	case builtinJSON, builtinCBOR:
		errc := make(chan error, 1)
		go func() { errc <- serveBuiltin(ctx, dir, etcdURL, kind == builtinCBOR) }()
		if err := waitKubeconfig(ctx, dir, errc); err != nil {
			return err
		}
		if err := ready(); err != nil {
			return err
		}
		return <-errc
	}
	return fmt.Errorf("unknown server %q", kind)
}

// serveCRD runs the hub's embedded kube-apiserver, as the hub does (less
// the hub's own admission plugins and audit log), and installs the hub's
// CRDs.
func serveCRD(ctx context.Context, dir, etcdURL string, useCBOR bool, logger *slog.Logger, ready func() error) error {
	ca, err := pki.NewCA("flotilla-apicost", certValidity)
	if err != nil {
		return err
	}
	cfg := apiserver.Config{DataDir: dir, Addr: "127.0.0.1:0", Etcd: apiserver.EtcdConfig{Servers: []string{etcdURL}}, CA: ca, Logger: logger,
		ExtraArgs: []string{"--etcd-prefix=/" + filepath.Base(dir)}}
	if useCBOR {
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--feature-gates=CBORServingAndStorage=true")
	}
	api, err := apiserver.Start(ctx, cfg)
	if err != nil {
		return err
	}
	all, err := crds.Hub()
	if err == nil {
		err = crds.Install(ctx, api.HubConfig, all)
	}
	if err == nil {
		err = ready()
	}
	if err != nil {
		return err
	}
	<-api.Done()
	return api.Err()
}

// waitKubeconfig waits until the generic server wrote its kubeconfig, or
// failed.
func waitKubeconfig(ctx context.Context, dir string, errc <-chan error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(dir, "admin.kubeconfig")); err == nil {
			return nil
		}
		select {
		case err := <-errc:
			return fmt.Errorf("generic API server stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
