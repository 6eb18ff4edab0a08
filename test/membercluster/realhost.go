package membercluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// What a test needs to treat a real node as a machine of its own: a folder
// on its disk, a program on its network, and a route to another cluster's
// machines.

// realNodeNamed returns the cluster's running real node of that name.
func (c *Cluster) realNodeNamed(name string) (*realNode, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.realNodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("cluster %s: no real node %q", c.Name, name)
}

// RealNodeDir creates and returns an empty folder name on real node node's
// disk, for a `local` PersistentVolume: the node's kubelet mounts it into
// pods as it is. It lives in the node's state folder on the host, so it
// outlives pods and releases and is removed with the node.
func (c *Cluster) RealNodeDir(node, name string) (string, error) {
	n, err := c.realNodeNamed(node)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(newNodeFiles(n.ns.Name).State, "disks", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("real node %s: %w", node, err)
	}
	return dir, nil
}

// RealNodeCommand is a command that runs bin with args on real node node's
// network, as a program on that machine would: it reaches the cluster's
// Service addresses through the node's kube-proxy, which the host does not.
func (c *Cluster) RealNodeCommand(ctx context.Context, node, bin string, args ...string) (*exec.Cmd, error) {
	n, err := c.realNodeNamed(node)
	if err != nil {
		return nil, err
	}
	name, argv := n.ns.EnterCommand(bin, args...)
	return exec.CommandContext(ctx, name, argv...), nil
}

// RouteRealNodes lets the real nodes of the clusters reach each other's
// node addresses through the host, as machines of two sites reach each
// other: it turns IPv4 forwarding on for packets that arrive on these
// clusters' bridges only (net.ipv4.conf.<bridge>.forwarding). The host's
// ip_forward stays as it is, and the setting goes with the bridges. Pods
// reach the other cluster too: their traffic leaves their node
// masqueraded to its address.
func RouteRealNodes(clusters ...*Cluster) error {
	for _, c := range clusters {
		if c.net == nil {
			return fmt.Errorf("cluster %s: no real nodes to route", c.Name)
		}
		path := filepath.Join("/proc/sys/net/ipv4/conf", c.net.bridge, "forwarding")
		if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("cluster %s: forwarding on bridge %s: %w", c.Name, c.net.bridge, err)
		}
	}
	return nil
}
