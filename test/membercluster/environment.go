// Package membercluster starts real Kubernetes member clusters for tests and
// the demo. One etcd is shared through distinct --etcd-prefix values; each
// cluster has its own kube-apiserver, kube-controller-manager, kube-scheduler
// and KWOK with fake nodes, so Deployments become Available as they would on
// a real cluster. The binaries come from `make testbin`.
//
// A cluster can also have real nodes (ClusterSpec.RealNodes) beside its KWOK
// ones: each a kubelet and kube-proxy from the testbin and a containerd of its
// own (Debian's, with runc and the CNI plugins), in its own network
// namespace, cgroup root and state folder under /var/lib/flotilla-realnodes,
// on a bridge of the cluster's own (see realNet). The cluster's API server
// then listens on that bridge, so pods reach it through the `kubernetes`
// Service unmodified. Images come from tarballs (Options.Images, and the
// testbin's pause.tar as the sandbox image); nothing is pulled. Real nodes
// need root; Start names whatever else is missing. Everything they create
// is named flrn<pid>-...: Stop removes it, and Start first sweeps what test
// binaries killed before their cleanup left.
//
// With Options.APIServerOnly, each cluster is just a kube-apiserver on the
// shared etcd: a bare API server for tests that store objects but run no
// workloads (test/hubapi builds the hub's test API server on it).
//
// Every child process dies with the process that started it, and Stop leaves
// no process or port behind.
package membercluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/test/process"
)

// Environment is a running set of member clusters.
type Environment struct {
	etcd     *sharedEtcd
	clusters []*Cluster
	logger   *slog.Logger
	stopOnce sync.Once
	stopErr  error
}

// Start starts the shared etcd and every cluster, and returns once all are
// ready for workloads. On error, whatever started is stopped again.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	for i := range opts.Clusters {
		opts.Clusters[i] = opts.Clusters[i].withDefaults()
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.BinDir == "" {
		dir, err := findBinDir(opts.binaries())
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	} else if err := checkBinDir(opts.BinDir, opts.binaries()); err != nil {
		return nil, err
	}
	binDir, err := filepath.Abs(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("member clusters: %w", err)
	}
	if opts.realNodes() && !opts.APIServerOnly {
		if err := requireRealNodes(binDir, opts.Images); err != nil {
			return nil, err
		}
		if err := sweepRealNodes(ctx); err != nil {
			opts.Logger.Warn("sweeping leftovers of real nodes", "err", err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("member clusters: %w", err)
	}

	// Before anything starts: a failure here leaves nothing to stop.
	stages, kwokArgs := filepath.Join(binDir, stagesFile), []string(nil)
	if opts.NodeStatusPeriod > 0 && !opts.APIServerOnly {
		if stages, err = writeStages(binDir, opts.Dir, opts.NodeStatusPeriod); err != nil {
			return nil, err
		}
		// As a kubelet: the node's Lease says it is alive, so the node
		// lifecycle controller does not wait for a status rewrite.
		kwokArgs = []string{fmt.Sprintf("--node-lease-duration-seconds=%d", nodeLeaseSeconds)}
	}
	var tuned tuning
	if opts.Tuned && !opts.APIServerOnly {
		if tuned, err = tunedComponents(opts.Dir); err != nil {
			return nil, err
		}
		kwokArgs = append(kwokArgs, tuned.kwok...)
	}

	started := time.Now()
	env := &Environment{logger: opts.Logger}
	opts.Logger.Info("starting shared etcd")
	env.etcd, err = startEtcd(ctx, binDir, opts.Dir)
	if err != nil {
		return nil, err
	}
	shared := clusterEnv{
		binDir:        binDir,
		stages:        stages,
		kwokArgs:      kwokArgs,
		etcdURL:       env.etcd.clientURL,
		apiServerOnly: opts.APIServerOnly,
		apiServerArgs: opts.APIServerArgs,
		tuning:        tuned,
		images:        opts.Images,
		logger:        opts.Logger,
	}
	env.clusters, err = startClusters(ctx, shared, opts)
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	opts.Logger.Info("member clusters ready", "count", len(env.clusters), "took", time.Since(started).Round(time.Millisecond))
	return env, nil
}

// startClusters starts all clusters at once; on any failure the ones that
// did start are stopped.
func startClusters(ctx context.Context, shared clusterEnv, opts Options) ([]*Cluster, error) {
	clusters := make([]*Cluster, len(opts.Clusters))
	errs := make([]error, len(opts.Clusters))
	var wg sync.WaitGroup
	for i, spec := range opts.Clusters {
		wg.Go(func() {
			clusterStart := time.Now()
			if shared.apiServerOnly {
				shared.logger.Info("starting API server", "cluster", spec.Name)
			} else {
				shared.logger.Info("starting cluster", "cluster", spec.Name, "nodes", spec.Nodes, "realNodes", spec.RealNodes)
			}
			clusters[i], errs[i] = startCluster(ctx, shared, spec, filepath.Join(opts.Dir, spec.Name))
			if errs[i] == nil {
				shared.logger.Info("cluster ready", "cluster", spec.Name, "server", clusters[i].Server,
					"kubeconfig", clusters[i].Kubeconfig, "took", time.Since(clusterStart).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clusters {
			if c != nil {
				err = errors.Join(err, c.stop())
			}
		}
		return nil, err
	}
	return clusters, nil
}

// Clusters returns the clusters in the order of Options.Clusters.
func (e *Environment) Clusters() []*Cluster { return e.clusters }

// Cluster returns the cluster with the given name, or nil.
func (e *Environment) Cluster(name string) *Cluster {
	for _, c := range e.clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Stop stops every cluster, then the shared etcd. It is safe to call more
// than once; later calls return the first result.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		e.logger.Info("stopping member clusters")
		errs := make([]error, len(e.clusters)+1)
		var wg sync.WaitGroup
		for i, c := range e.clusters {
			wg.Go(func() { errs[i] = c.stop() })
		}
		wg.Wait()
		if e.etcd != nil {
			errs[len(e.clusters)] = e.etcd.proc.Stop()
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// Resources lists the process ids and TCP ports the environment uses now,
// so a test can check that Stop left none of them behind.
func (e *Environment) Resources() (pids, ports []int) {
	procs := []*process.Process{e.etcd.proc}
	ports = append(ports, e.etcd.ports...)
	for _, c := range e.clusters {
		procs = append(procs, c.processes()...)
		ports = append(ports, c.port)
	}
	for _, p := range procs {
		if pid := p.Pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids, ports
}
