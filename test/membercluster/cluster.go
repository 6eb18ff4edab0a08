package membercluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/test/freeport"
	"github.com/flotilla-io/flotilla/test/process"
)

// Cluster is one running member cluster: an API server on the shared etcd,
// a controller-manager, a scheduler and KWOK with fake nodes (only the API
// server with Options.APIServerOnly).
type Cluster struct {
	// Name is the cluster's name from its spec.
	Name string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Server is the API server's URL.
	Server string

	spec   ClusterSpec
	dir    string
	port   int
	logger *slog.Logger

	mu                                            sync.Mutex // guards the processes against concurrent Stop/Start
	apiserver, controllerManager, scheduler, kwok *process.Process
	net                                           *realNet    // the real nodes' bridge, or nil
	realNodes                                     []*realNode // in start order
}

// The Service range of every cluster, and the `kubernetes` Service's
// address in it.
const serviceCIDR = "10.96.0.0/16"

var serviceIP = netip.MustParseAddr("10.96.0.1")

// clusterEnv is what every cluster shares.
type clusterEnv struct {
	binDir        string
	stages        string   // KWOK stage configuration
	kwokArgs      []string // extra KWOK flags
	etcdURL       string
	apiServerOnly bool
	apiServerArgs []string
	tuning        tuning   // extra flags of the other components (Options.Tuned)
	images        []string // tarballs for real nodes
	logger        *slog.Logger
}

// startCluster starts one cluster's components and waits until its nodes are
// Ready and its default service account exists, so Pods can be admitted; or,
// API server only, until the API server is ready.
func startCluster(ctx context.Context, env clusterEnv, spec ClusterSpec, dir string) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	c := &Cluster{Name: spec.Name, spec: spec, dir: dir, logger: env.logger.With("cluster", spec.Name)}
	host := netip.MustParseAddr("127.0.0.1") // where the API server listens
	if spec.RealNodes > 0 && !env.apiServerOnly {
		rn, err := newRealNet(ctx)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
		c.net, host = rn, rn.hostAddr()
	}
	files := newClusterFiles(dir)
	c.Kubeconfig = files.kubeconfig
	creds, err := writeCredentials(spec.Name, files, host)
	if err != nil {
		return nil, c.abort(fmt.Errorf("cluster %s: %w", spec.Name, err))
	}

	configure := func() (*process.Process, error) {
		port, err := freeport.TCP()
		if err != nil {
			return nil, err
		}
		c.port = port
		c.Server = "https://" + net.JoinHostPort(host.String(), strconv.Itoa(port))
		if err := writeKubeconfig(spec.Name, c.Server, files.kubeconfig, creds); err != nil {
			return nil, err
		}
		return c.apiserverProcess(env, files, host), nil
	}
	c.apiserver, err = startReady(ctx, configure, c.apiserverReady)
	if err != nil {
		return nil, c.abort(fmt.Errorf("cluster %s: %w", spec.Name, err))
	}
	if env.apiServerOnly {
		return c, nil
	}
	c.controllerManager = c.component(env, "kube-controller-manager", append([]string{
		"--service-account-private-key-file=" + files.saPrivate,
		"--root-ca-file=" + files.caCert,
		"--cluster-name=" + spec.Name,
		"--use-service-account-credentials=false"}, env.tuning.controllerManager...)...)
	c.scheduler = c.component(env, "kube-scheduler", env.tuning.scheduler...)
	c.kwok = &process.Process{
		Name:   spec.Name + "/kwok",
		Binary: filepath.Join(env.binDir, "kwok"),
		Args: append([]string{
			"--kubeconfig=" + files.kubeconfig,
			"--config=" + env.stages,
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--cidr=10.244.0.0/16",
		}, env.kwokArgs...),
		LogPath: filepath.Join(dir, "kwok.log"),
	}
	for _, p := range []*process.Process{c.controllerManager, c.scheduler, c.kwok} {
		if err := p.Start(); err != nil {
			return nil, c.abort(fmt.Errorf("cluster %s: %w", spec.Name, err))
		}
	}
	for i := 1; i <= spec.RealNodes; i++ {
		node, err := c.startRealNode(ctx, env, i)
		if err != nil {
			return nil, c.abort(fmt.Errorf("cluster %s: %w", spec.Name, err))
		}
		c.mu.Lock()
		c.realNodes = append(c.realNodes, node)
		c.mu.Unlock()
	}
	if err := c.waitWorkloadReady(ctx); err != nil {
		return nil, c.abort(fmt.Errorf("cluster %s: %w", spec.Name, err))
	}
	return c, nil
}

// component describes a controller-manager or scheduler: admin kubeconfig,
// no leader election (one replica), no serving port to collide on.
func (c *Cluster) component(env clusterEnv, name string, extra ...string) *process.Process {
	kubeconfig := "--kubeconfig=" + c.Kubeconfig
	args := append([]string{
		kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, extra...)
	return &process.Process{
		Name:    c.Name + "/" + name,
		Binary:  filepath.Join(env.binDir, name),
		Args:    args,
		LogPath: filepath.Join(c.dir, name+".log"),
	}
}

// apiserverProcess describes the API server, listening on host: the
// loopback, or with real nodes the address their pods reach it at, which
// the `kubernetes` Service then points to.
func (c *Cluster) apiserverProcess(env clusterEnv, files clusterFiles, host netip.Addr) *process.Process {
	reconciler := "lease"
	if host.IsLoopback() {
		reconciler = "none" // the default reconciler refuses a loopback advertise address
	}
	return &process.Process{
		Name:   c.Name + "/kube-apiserver",
		Binary: filepath.Join(env.binDir, "kube-apiserver"),
		Args: append([]string{
			"--etcd-servers=" + env.etcdURL,
			"--etcd-prefix=/clusters/" + c.Name,
			"--bind-address=" + host.String(),
			"--advertise-address=" + host.String(),
			"--secure-port=" + strconv.Itoa(c.port),
			"--endpoint-reconciler-type=" + reconciler,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--tls-cert-file=" + files.servingCert,
			"--tls-private-key-file=" + files.servingKey,
			"--client-ca-file=" + files.caCert,
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + files.saPublic,
			"--service-account-signing-key-file=" + files.saPrivate,
			"--authorization-mode=RBAC",
			"--allow-privileged=true",
			// Nodes' names do not resolve: logs, exec and port-forward
			// reach a real node's kubelet at its address.
			"--kubelet-preferred-address-types=InternalIP",
			"--profiling=false",
			"--v=1",
		}, env.apiServerArgs...),
		LogPath: filepath.Join(c.dir, "kube-apiserver.log"),
	}
}

// RESTConfig returns a fresh admin client configuration for the cluster,
// with client-side rate limits raised for tests.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: load kubeconfig: %w", c.Name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Clientset returns a typed client for the cluster.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// StopAPIServer kills the cluster's API server, as in a crash, making the
// cluster unreachable; its data stays in etcd. The other components keep
// running and reconnect when it is back. (A graceful stop would wait a minute
// for the other components' watches to drain.)
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logger.Info("stopping API server")
	return c.apiserver.Kill()
}

// StartAPIServer starts a stopped API server again on the same address and
// waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logger.Info("starting API server again")
	if err := c.apiserver.Start(); err != nil {
		return err
	}
	if err := waitReady(ctx, c.apiserver, c.apiserverReady); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return nil
}

// stop stops every component, real nodes first and the API server last so
// the others do not spin on a dead connection, then removes the real nodes'
// bridge.
func (c *Cluster) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := make([]error, len(c.realNodes))
	var wg sync.WaitGroup
	for i, n := range c.realNodes {
		wg.Go(func() { errs[i] = n.stop() })
	}
	wg.Wait()
	errs = append(errs, stopAll(c.kwok, c.scheduler, c.controllerManager, c.apiserver))
	if c.net != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		errs = append(errs, c.net.close(ctx))
	}
	return errors.Join(errs...)
}

// abort stops what started and returns err, joined with any stop failure.
func (c *Cluster) abort(err error) error {
	if stopErr := c.stop(); stopErr != nil {
		return fmt.Errorf("%w (and while stopping: %v)", err, stopErr)
	}
	return err
}

// processes lists the cluster's components, for leak checks.
func (c *Cluster) processes() []*process.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var procs []*process.Process
	for _, p := range []*process.Process{c.apiserver, c.controllerManager, c.scheduler, c.kwok} {
		if p != nil {
			procs = append(procs, p)
		}
	}
	for _, n := range c.realNodes {
		procs = append(procs, n.processes()...)
	}
	return procs
}

// RealNode is a running real node of a cluster.
type RealNode struct {
	// Name is the Node's name.
	Name string
	// Pids are the process ids of its kubelet, containerd and kube-proxy
	// (not of its containers and their shims).
	Pids []int
}

// RealNodes lists the cluster's real nodes.
func (c *Cluster) RealNodes() []RealNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nodes []RealNode
	for _, n := range c.realNodes {
		nodes = append(nodes, RealNode{Name: n.Name, Pids: n.Pids()})
	}
	return nodes
}

// PodReachableAddr is the host's address on the bridge of the cluster's
// real nodes, where their pods reach the host (the API server listens
// there): a test serves something to pods, e.g. a hub, on it. It is not
// valid (IsValid false) when the cluster has no real nodes.
func (c *Cluster) PodReachableAddr() netip.Addr {
	if c.net == nil {
		return netip.Addr{}
	}
	return c.net.hostAddr()
}
