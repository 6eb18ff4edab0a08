package membercluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"text/template"
)

// PauseImage is the sandbox image of real nodes: `make testbin` packages a
// tiny static pause binary under this name (pause.tar), so it is never
// pulled.
const PauseImage = "registry.k8s.io/pause:3.10"

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// nodeFiles are the paths of one real node's configuration and state.
type nodeFiles struct {
	State                                            string // realStateRoot/<name>
	ContainerdConfig, Socket, CNIConf, CNIIPAM       string
	KubeletConfig, KubeletRoot, PodLogs, ProxyConfig string
}

func newNodeFiles(name string) nodeFiles {
	s := filepath.Join(realStateRoot, name)
	p := func(name string) string { return filepath.Join(s, name) }
	return nodeFiles{
		State:            s,
		ContainerdConfig: p("containerd.toml"),
		Socket:           p("containerd.sock"),
		CNIConf:          p("cni"),
		CNIIPAM:          p("cni-ipam"),
		KubeletConfig:    p("kubelet.yaml"),
		KubeletRoot:      p("kubelet"),
		PodLogs:          p("pod-logs"),
		ProxyConfig:      p("kube-proxy.yaml"),
	}
}

// nodeConfig is what the configuration templates need.
type nodeConfig struct {
	Name, Kubeconfig, CgroupRoot string
	Files                        nodeFiles
	NodeIP                       netip.Addr
	PodSubnet, ClusterCIDR       netip.Prefix
	PauseImage, CNIBinDir        string
}

// containerdTemplate is a containerd 1.6 configuration private to one
// node: its own root, state, socket and CNI configuration; the sandbox
// image that is loaded locally; and restrict_oom_score_adj, because a
// sandbox without CAP_SYS_RESOURCE cannot lower a score (runc then fails
// with "can't get final child's PID from pipe"). Pod network namespaces
// are mounted under the state folder, so cleanup finds them.
var containerdTemplate = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Files.State}}/containerd/root"
state = "{{.Files.State}}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{{.Files.Socket}}"

[ttrpc]
  address = "{{.Files.Socket}}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Files.State}}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.PauseImage}}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.Files.CNIConf}}"
`))

// cniTemplate: the node's pods on its own bridge, their traffic out of the
// node masqueraded to the node's address, hairpin so a pod reaches itself
// through a Service.
var cniTemplate = template.Must(template.New("cni").Parse(`{
  "cniVersion": "1.0.0",
  "name": "flotilla-realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{.Files.CNIIPAM}}",
        "ranges": [[{"subnet": "{{.PodSubnet}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`))

// kubeletTemplate: cgroupfs on this cgroup v1 host, its own cgroup root and
// folders, no swap or local storage checks, eviction only near the end,
// and a kubelet API open to the API server without credentials (the node
// listens on its own namespace's address only).
var kubeletTemplate = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{{.Files.Socket}}
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
failCgroupV1: false
failSwapOn: false
localStorageCapacityIsolation: false
podLogsDir: {{.Files.PodLogs}}
address: {{.NodeIP}}
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
resolvConf: /etc/resolv.conf
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`))

// proxyTemplate: iptables in the node's namespace; conntrack limits, which
// are host-wide, left alone.
var proxyTemplate = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{.Kubeconfig}}
hostnameOverride: {{.Name}}
mode: iptables
clusterCIDR: {{.ClusterCIDR}}
bindAddress: {{.NodeIP}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`))

// writeNodeConfig creates the node's folders and configuration files.
func writeNodeConfig(cfg nodeConfig) error {
	for _, dir := range []string{cfg.Files.CNIConf, cfg.Files.CNIIPAM, cfg.Files.KubeletRoot, cfg.Files.PodLogs} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("real node %s: %w", cfg.Name, err)
		}
	}
	for path, tmpl := range map[string]*template.Template{
		cfg.Files.ContainerdConfig:                             containerdTemplate,
		filepath.Join(cfg.Files.CNIConf, "10-bridge.conflist"): cniTemplate,
		cfg.Files.KubeletConfig:                                kubeletTemplate,
		cfg.Files.ProxyConfig:                                  proxyTemplate,
	} {
		if err := writeTemplate(path, tmpl, cfg); err != nil {
			return fmt.Errorf("real node %s: %w", cfg.Name, err)
		}
	}
	return nil
}

func writeTemplate(path string, tmpl *template.Template, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tmpl.Execute(f, data); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return f.Close()
}
