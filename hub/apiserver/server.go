// Package apiserver runs a real kube-apiserver inside the hub process, over
// the hub's etcd (the embedded one on its unix socket, or an external
// cluster), the way Kubernetes' own integration-test server embeds it:
// options, then config, then the server chain, run on the hub's context.
// Nothing else of Kubernetes' control plane runs on the hub: resource
// templates stay inert objects, as in Karmada.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/admission"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"

	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/internal/version"
)

// Config is what the embedded API server needs.
type Config struct {
	// DataDir is the hub's data directory: the API server keeps its keys in
	// DataDir/apiserver and writes DataDir/admin.kubeconfig.
	DataDir string
	// Addr is the HTTPS address to serve (host:port; port 0 picks one).
	Addr string
	// Etcd says where the API server stores its objects.
	Etcd EtcdConfig
	// CA is the hub CA: it signs the serving and client certificates, and
	// client certificates it signed authenticate (CN user, O groups).
	CA *pki.CA
	// SANs are extra DNS names or IPs for the serving certificate.
	SANs []string
	// AuditLogPath receives one JSON line per audited request ("-" is
	// stdout, empty turns auditing off); AuditPolicyFile replaces the
	// default policy (every write, with its user, at Metadata level).
	AuditLogPath    string
	AuditPolicyFile string
	// ExtraArgs are kube-apiserver flags (--name=value) passed through
	// as they are, e.g. the --oidc-* flags; they win over the hub's own.
	ExtraArgs []string
	// Admission plugins run in-process after the built-in ones.
	Admission []AdmissionPlugin
	Logger    *slog.Logger
}

// EtcdConfig is the API server's storage.
type EtcdConfig struct {
	// Servers are etcd URLs, e.g. unix:///var/lib/flotilla/etcd/client.sock.
	Servers []string
	// CAFile, CertFile and KeyFile secure the connection to an external etcd.
	CAFile, CertFile, KeyFile string
}

// AdmissionPlugin is an admission controller compiled into the hub.
type AdmissionPlugin struct {
	Name string
	New  func() (admission.Interface, error)
}

// Server is a running API server.
type Server struct {
	// URL is the address clients on this machine use (https://host:port).
	URL string
	// AdminKubeconfig is the path of the admin kubeconfig (mode 0600).
	AdminKubeconfig string
	// HubConfig is the hub's own client configuration (user flotilla:hub,
	// group system:masters); its writes are told apart in the audit log.
	HubConfig *rest.Config

	done chan struct{}
	err  error
}

// Done is closed when the server has stopped; Err then says why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the reason the server stopped (nil after a clean shutdown).
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// RouteKlog sends klog's output (kube-apiserver's, client-go's, and gRPC's
// inside etcd) to logger, one level down for info lines. Call it once, at
// start, before the store opens: the embedded etcd's gRPC server logs
// through klog from then on, and klog's logger must not change under it.
func RouteKlog(logger *slog.Logger) {
	klog.SetSlogLogger(slog.New(quietHandler{logger.Handler()}).With("component", "kube-apiserver"))
}

// readyTimeout bounds the wait for /readyz; startup takes about 3 s.
const readyTimeout = 2 * time.Minute

// started counts API servers started in this process: each needs an
// informer name of its own.
var started atomic.Int64

// Start runs the API server until ctx ends and returns once it answers
// /readyz. Call it once per process, but for tests.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir := filepath.Join(cfg.DataDir, "apiserver")
	files, err := ensureFiles(dir, cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--api-addr %s: %w", cfg.Addr, err)
	}
	closeLn := true
	defer func() {
		if closeLn {
			ln.Close()
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	url := "https://" + net.JoinHostPort(clientHost(addr.IP), fmt.Sprint(addr.Port))

	opts := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range opts.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	for _, p := range cfg.Admission {
		opts.Admission.GenericAdmission.Plugins.Register(p.Name, func(_ io.Reader) (admission.Interface, error) { return p.New() })
		opts.Admission.GenericAdmission.RecommendedPluginOrder = append(opts.Admission.GenericAdmission.RecommendedPluginOrder, p.Name)
	}
	args := arguments(cfg, files, addr)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-apiserver arguments %q: %w", args, err)
	}
	opts.SecureServing.Listener, opts.SecureServing.BindPort = ln, addr.Port
	name, err := cache.NewInformerName(fmt.Sprintf("flotilla-hub-apiserver-%d", started.Add(1)))
	if err != nil {
		return nil, err
	}
	opts.InformerName = name

	if err := opts.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("kube-apiserver feature gates: %w", err)
	}
	completed, err := opts.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kube-apiserver options: %w", errors.Join(errs...))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	chain := config.Aggregator.GenericConfig.BuildHandlerChainFunc
	info := version.Get()
	config.Aggregator.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return chain(versionHandler(h, info), c)
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver config: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}

	s := &Server{URL: url, AdminKubeconfig: files.adminKubeconfig, done: make(chan struct{})}
	s.HubConfig = clientConfig(url, cfg.CA.CertPEM(), files.hubCert, files.hubKey)
	closeLn = false // the server owns it now
	go func() {
		defer close(s.done)
		s.err = prepared.Run(ctx)
		name.Release()
	}()
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := WriteAdminKubeconfig(files.adminKubeconfig, url, cfg.CA); err != nil {
		return nil, err
	}
	cfg.Logger.Info("API server ready", "url", url, "kubeconfig", files.adminKubeconfig, "version", info.KubernetesGitVersion())
	return s, nil
}

// waitReady polls /readyz until it says ok, the server stops or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(s.HubConfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		status := 0
		last = client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status).Error()
		if last == nil && status == http.StatusOK {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("kube-apiserver stopped while starting: %w", s.err)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after %v: %w", readyTimeout, errors.Join(ctx.Err(), last))
		case <-tick.C:
		}
	}
}

// clientHost is the host clients on this machine dial for a listener on ip:
// loopback for wildcard addresses.
func clientHost(ip net.IP) string {
	if ip == nil || ip.IsUnspecified() {
		return "127.0.0.1" // a wildcard listener is dual-stack
	}
	return ip.String()
}
