package hubapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// Settings of the server and its clients.
const (
	// clusterName names the API server's folder under Dir and its etcd prefix.
	clusterName = "hub"
	// startTimeout bounds start-up, CRDs included.
	startTimeout = 2 * time.Minute
	// pollPeriod paces the waits for the server to catch up.
	pollPeriod = 20 * time.Millisecond
	// Client-side rate limits, high enough that tests are never throttled.
	clientQPS, clientBurst = 500, 1000
)

// apiServerArgs make the server admit what the hub's embedded one admits:
// nothing runs Pods or owns ServiceAccounts there, so the hub turns off the
// admission plugins that would refuse or mutate inert templates (a Pod in a
// namespace without a "default" ServiceAccount, for one).
var apiServerArgs = []string{
	"--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection,DefaultTolerationSeconds",
	"--anonymous-auth=false",
}

// start starts etcd and kube-apiserver from binDir (empty: found like
// membercluster.FindBinDir) in a new temporary folder and installs the CRDs.
// On error, whatever started is stopped again.
func start(ctx context.Context, binDir string) (*Env, error) {
	dir, err := os.MkdirTemp("", "flotilla-hubapi-")
	if err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	servers, err := membercluster.Start(ctx, membercluster.Options{
		Dir:           dir,
		BinDir:        binDir,
		Clusters:      []membercluster.ClusterSpec{{Name: clusterName}},
		APIServerOnly: true,
		APIServerArgs: apiServerArgs,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start API server: %w", err), os.RemoveAll(dir))
	}
	server := servers.Cluster(clusterName)
	env := &Env{Server: server.Server, Kubeconfig: server.Kubeconfig, Dir: dir, servers: servers}
	if err := env.setUp(ctx, server); err != nil {
		return nil, errors.Join(err, env.stop())
	}
	return env, nil
}

// setUp installs the CRDs, makes the clients and warms the custom resources
// up.
func (e *Env) setUp(ctx context.Context, server *membercluster.Cluster) error {
	cfg, err := server.RESTConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	e.config = cfg
	all, err := crds.Hub()
	if err != nil {
		return err
	}
	if err := installCRDs(ctx, cfg, all); err != nil {
		return fmt.Errorf("%w (API server log: %s)", err, e.apiServerLog())
	}
	if e.Flotilla, err = versioned.NewForConfig(cfg); err != nil {
		return fmt.Errorf("flotilla client: %w", err)
	}
	if e.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{}
	if e.cleaner, err = dynamic.NewForConfig(quiet); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	e.clusterKinds = resources(all, apiextensionsv1.ClusterScoped)
	return e.warmUp(ctx, resources(all, ""))
}

func (e *Env) apiServerLog() string {
	return filepath.Join(e.Dir, clusterName, "kube-apiserver.log")
}

// stop stops kube-apiserver and etcd and removes Dir. The API server is
// killed rather than drained, which would take a second: its data goes.
func (e *Env) stop() error {
	return errors.Join(
		e.servers.Cluster(clusterName).StopAPIServer(),
		e.servers.Stop(),
		os.RemoveAll(e.Dir),
	)
}
