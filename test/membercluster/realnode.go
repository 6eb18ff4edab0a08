package membercluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/test/netbed"
	"github.com/flotilla-io/flotilla/test/process"
)

// NodeTypeLabel tells real nodes (value RealNodeType) from KWOK's
// ("kwok"): a pod that must really run selects RealNodeType.
const (
	NodeTypeLabel = "type"
	RealNodeType  = "real"
)

// importTimeout bounds loading one image tarball into a node's containerd.
const importTimeout = 2 * time.Minute

// realNode is one kubelet with its own containerd and kube-proxy, in its
// own network namespace, cgroup root and state folder, all named ns.Name.
type realNode struct {
	Name string // the Node's name
	ns   *netbed.Namespace
	logs string // folder of the daemons' logs (the cluster's)

	containerd, kubelet, kubeProxy *process.Process
}

// realNodeBinaries are the host's programs a real node needs, with the
// Debian package that has each.
var realNodeBinaries = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc",
	"nsenter": "util-linux", "ip": "iproute2", "iptables": "iptables",
	filepath.Join(cniBinDir, "bridge"):     "containernetworking-plugins",
	filepath.Join(cniBinDir, "host-local"): "containernetworking-plugins",
	filepath.Join(cniBinDir, "loopback"):   "containernetworking-plugins",
	filepath.Join(cniBinDir, "portmap"):    "containernetworking-plugins",
}

// realNodeTestbin are the files of the testbin a real node needs.
var realNodeTestbin = []string{"kubelet", "kube-proxy", "pause.tar"}

// CheckRealNodes says what this machine lacks to run real nodes with the
// test binaries in binDir (root, Debian packages, testbin files), or nil:
// a program that can do without real nodes asks before it asks for them.
func CheckRealNodes(binDir string) error { return requireRealNodes(binDir, nil) }

// requireRealNodes names what this machine lacks to run real nodes.
func requireRealNodes(binDir string, images []string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (namespaces, cgroups, mounts and iptables need it)")
	}
	for bin, pkg := range realNodeBinaries {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", bin, pkg))
		}
	}
	for _, f := range realNodeTestbin {
		if _, err := os.Stat(filepath.Join(binDir, f)); err != nil {
			missing = append(missing, fmt.Sprintf("%s in the testbin %s (make testbin)", f, binDir))
		}
	}
	for _, img := range images {
		if _, err := os.Stat(img); err != nil {
			missing = append(missing, fmt.Sprintf("image tarball %s", img))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("member clusters: real nodes need what this machine lacks: %s", strings.Join(missing, ", "))
	}
	return nil
}

// startRealNode builds node i of the cluster (1-based) and starts its
// containerd (with the images loaded), kubelet and kube-proxy. On error
// it removes what it made.
func (c *Cluster) startRealNode(ctx context.Context, env clusterEnv, i int) (*realNode, error) {
	ns, err := c.net.addNode(ctx, i)
	if err != nil {
		return nil, err
	}
	n := &realNode{Name: fmt.Sprintf("%s-real-%d", c.Name, i), ns: ns, logs: c.dir}
	if err := n.start(ctx, env, c, i); err != nil {
		return nil, errors.Join(err, n.stop())
	}
	return n, nil
}

func (n *realNode) start(ctx context.Context, env clusterEnv, c *Cluster, i int) error {
	files := newNodeFiles(n.ns.Name)
	cfg := nodeConfig{
		Name: n.Name, Kubeconfig: c.Kubeconfig, CgroupRoot: "/" + n.ns.Name, Files: files,
		NodeIP: n.ns.Addr, PodSubnet: c.net.podSubnet(i), ClusterCIDR: c.net.clusterCIDR(),
		PauseImage: PauseImage, CNIBinDir: cniBinDir,
	}
	if err := writeNodeConfig(cfg); err != nil {
		return err
	}
	if err := createCgroup(n.ns.Name); err != nil {
		return fmt.Errorf("real node %s: %w", n.Name, err)
	}
	n.containerd = n.daemon("containerd", "containerd", "--config="+files.ContainerdConfig)
	if err := n.containerd.Start(); err != nil {
		return err
	}
	if err := waitReady(ctx, n.containerd, func(ctx context.Context) error {
		return n.ctr(ctx, "version")
	}); err != nil {
		return fmt.Errorf("real node %s: %w", n.Name, err)
	}
	images := append([]string{filepath.Join(env.binDir, "pause.tar")}, env.images...)
	for _, img := range images {
		ictx, cancel := context.WithTimeout(ctx, importTimeout)
		err := n.ctr(ictx, "-n", "k8s.io", "images", "import", img)
		cancel()
		if err != nil {
			return fmt.Errorf("real node %s: load image: %w", n.Name, err)
		}
	}
	n.kubelet = n.daemon("kubelet", filepath.Join(env.binDir, "kubelet"),
		"--config="+files.KubeletConfig,
		"--kubeconfig="+c.Kubeconfig,
		"--root-dir="+files.KubeletRoot,
		"--hostname-override="+n.Name,
		"--node-ip="+n.ns.Addr.String(),
		"--node-labels="+NodeTypeLabel+"="+RealNodeType,
		"--v=1")
	n.kubeProxy = n.daemon("kube-proxy", filepath.Join(env.binDir, "kube-proxy"),
		"--config="+files.ProxyConfig, "--v=1")
	for _, p := range []*process.Process{n.kubelet, n.kubeProxy} {
		if err := p.Start(); err != nil {
			return err
		}
	}
	return nil
}

// daemon describes one of the node's processes, run in its namespace.
func (n *realNode) daemon(name, bin string, args ...string) *process.Process {
	binary, argv := n.ns.EnterCommand(bin, args...)
	return &process.Process{
		Name:    n.Name + "/" + name,
		Binary:  binary,
		Args:    argv,
		LogPath: filepath.Join(n.logs, n.Name+"-"+name+".log"),
	}
}

// ctr runs containerd's client against the node's containerd.
func (n *realNode) ctr(ctx context.Context, args ...string) error {
	argv := append([]string{"--address", newNodeFiles(n.ns.Name).Socket}, args...)
	out, err := exec.CommandContext(ctx, "ctr", argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// stop stops the daemons (kube-proxy and kubelet first, so nothing restarts
// the containers), then removes the containers, mounts, cgroups, network
// namespace and state the node leaves.
func (n *realNode) stop() error {
	errs := []error{stopAll(n.kubeProxy, n.kubelet, n.containerd)}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	errs = append(errs, cleanNode(ctx, n.ns.Name))
	return errors.Join(errs...)
}

// processes lists the node's daemons, for leak checks.
func (n *realNode) processes() []*process.Process {
	var procs []*process.Process
	for _, p := range []*process.Process{n.containerd, n.kubelet, n.kubeProxy} {
		if p != nil {
			procs = append(procs, p)
		}
	}
	return procs
}

// Pids returns the process ids of the node's containerd, kubelet and
// kube-proxy that run now (for measuring what a real node costs).
func (n *realNode) Pids() []int {
	var pids []int
	for _, p := range n.processes() {
		if pid := p.Pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
