package membercluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options configure a set of member clusters.
type Options struct {
	// Dir holds the shared etcd's data and one folder per cluster with its
	// kubeconfig, certificates and component logs. It is created if missing.
	Dir string
	// BinDir holds the test binaries; empty means FindBinDir.
	BinDir string
	// Clusters to start, at least one.
	Clusters []ClusterSpec
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
	// APIServerOnly starts etcd and each cluster's kube-apiserver, nothing
	// else: no controller-manager, scheduler, KWOK or nodes, so nothing acts
	// on what is stored (no garbage collection, no namespace deletion, no
	// service accounts). Start returns once every API server is ready; the
	// node fields of ClusterSpec are ignored, and only etcd and
	// kube-apiserver need to be in BinDir.
	APIServerOnly bool
	// APIServerArgs are extra kube-apiserver flags (--name=value) for every
	// cluster. They come after the package's own, so they win.
	APIServerArgs []string
	// NodeStatusPeriod is how often, on average, KWOK rewrites a Ready
	// node's status. Zero keeps KWOK's heartbeat stage, 20-25 s, and no
	// node Leases. Set, KWOK also renews each node's Lease in
	// kube-node-lease, as a kubelet does; a kubelet rewrites an unchanged
	// status every 5 minutes (nodeStatusReportFrequency). At least a
	// second; ignored with APIServerOnly (no KWOK).
	NodeStatusPeriod time.Duration
	// Images are OCI image tarballs (`make images`) loaded into every real
	// node's containerd, beside the pause image; pods use them with
	// imagePullPolicy IfNotPresent or Never (nothing is pulled).
	Images []string
	// Tuned raises the member clusters' own throughput, so that a
	// measurement of the hub is not bounded by them: the controller-
	// manager's and the scheduler's client rate limits (20 and 50 requests
	// a second by default) to 1,000, the deployment and replica set
	// controllers' workers from 5 to 25, and the pods KWOK moves through
	// their stages at once from 4 to 32. Ignored with APIServerOnly.
	Tuned bool
}

// realNodes reports whether any cluster asks for real nodes.
func (o Options) realNodes() bool {
	for _, s := range o.Clusters {
		if s.RealNodes > 0 {
			return true
		}
	}
	return false
}

// binaries lists the files of BinDir the options need.
func (o Options) binaries() []string {
	if o.APIServerOnly {
		return apiServerBinaries
	}
	return allBinaries
}

// ClusterSpec describes one member cluster and its fake nodes.
type ClusterSpec struct {
	// Name is a DNS label, unique among the clusters; it also names the
	// cluster's folder and etcd prefix.
	Name string
	// Nodes is the number of KWOK fake nodes (default 3, or none when
	// RealNodes is set).
	Nodes int
	// RealNodes is the number of real nodes beside the KWOK ones: a
	// kubelet, containerd and kube-proxy each, that run containers (see
	// the package documentation). They are labelled NodeTypeLabel=
	// RealNodeType. Ignored with APIServerOnly.
	RealNodes int
	// NodeCPU, NodeMemory and NodePods are each node's allocatable resources
	// as Kubernetes quantities (defaults "8", "32Gi", "110").
	NodeCPU, NodeMemory, NodePods string
}

// maxRealNodes bounds a cluster's real nodes: each has a /24 of its
// cluster's 10.K.0.0/16 for its pods (and real nodes are for realism, not
// for load: KWOK's are).
const maxRealNodes = 16

// Default node shape, the size of a common cloud worker.
const (
	DefaultNodes      = 3
	DefaultNodeCPU    = "8"
	DefaultNodeMemory = "32Gi"
	DefaultNodePods   = "110"
)

// Specs returns count default clusters named member-1 ... member-count.
func Specs(count int) []ClusterSpec {
	specs := make([]ClusterSpec, count)
	for i := range specs {
		specs[i] = ClusterSpec{Name: fmt.Sprintf("member-%d", i+1)}
	}
	return specs
}

func (s ClusterSpec) withDefaults() ClusterSpec {
	if s.Nodes == 0 && s.RealNodes == 0 {
		s.Nodes = DefaultNodes
	}
	if s.NodeCPU == "" {
		s.NodeCPU = DefaultNodeCPU
	}
	if s.NodeMemory == "" {
		s.NodeMemory = DefaultNodeMemory
	}
	if s.NodePods == "" {
		s.NodePods = DefaultNodePods
	}
	return s
}

// validate checks the options after defaults are applied.
func (o Options) validate() error {
	if o.Dir == "" {
		return errors.New("member clusters: Dir is empty")
	}
	if len(o.Clusters) == 0 {
		return errors.New("member clusters: no clusters requested")
	}
	if o.NodeStatusPeriod != 0 && o.NodeStatusPeriod < time.Second {
		return fmt.Errorf("member clusters: NodeStatusPeriod %v: want 0 (KWOK's heartbeat) or at least 1s", o.NodeStatusPeriod)
	}
	seen := map[string]bool{}
	for i, spec := range o.Clusters {
		if msgs := validation.IsDNS1123Label(spec.Name); len(msgs) > 0 {
			return fmt.Errorf("member clusters: clusters[%d].name %q: %v", i, spec.Name, msgs)
		}
		if seen[spec.Name] {
			return fmt.Errorf("member clusters: clusters[%d].name %q: duplicate", i, spec.Name)
		}
		seen[spec.Name] = true
		if spec.Nodes < 0 || spec.RealNodes < 0 || spec.Nodes+spec.RealNodes < 1 {
			return fmt.Errorf("member clusters: clusters[%d] (%s).nodes %d, realNodes %d: want at least 1 node in all", i, spec.Name, spec.Nodes, spec.RealNodes)
		}
		if spec.RealNodes > maxRealNodes {
			return fmt.Errorf("member clusters: clusters[%d] (%s).realNodes %d: want at most %d", i, spec.Name, spec.RealNodes, maxRealNodes)
		}
		for field, value := range map[string]string{"nodeCPU": spec.NodeCPU, "nodeMemory": spec.NodeMemory, "nodePods": spec.NodePods} {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return fmt.Errorf("member clusters: clusters[%d] (%s).%s %q: %w", i, spec.Name, field, value, err)
			}
			if q.Sign() <= 0 {
				return fmt.Errorf("member clusters: clusters[%d] (%s).%s %q: want a positive quantity", i, spec.Name, field, value)
			}
		}
	}
	return nil
}
