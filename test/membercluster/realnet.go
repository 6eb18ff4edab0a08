package membercluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/flotilla-io/flotilla/test/netbed"
)

// realPrefix starts the name of everything real nodes create on the host
// (bridges, namespaces, cgroups, state folders): realPrefix<pid>-<hex>, so
// sweepRealNodes can tell leftovers of killed test binaries from the live.
const realPrefix = "flrn"

// realNetLock serialises the choice of a free address block among test
// binaries running at once.
const realNetLock = "/run/flotilla-realnodes.lock"

// Address blocks 10.<octet>.0.0/16 a cluster with real nodes may take: not
// the Service range 10.96.0.0/16 nor KWOK's pod range 10.244.0.0/16.
const firstOctet, lastOctet = 100, 199

// realNet is the network of one cluster's real nodes: a bridge on the host
// at 10.<octet>.0.1, where the cluster's API server listens, and each node
// a network namespace at 10.<octet>.0.<i+1> on it, with its pods in
// 10.<octet>.<i>.0/24 behind the node's own bridge (CNI's).
//
//	host: API server 10.K.0.1:port ── bridge flrnXXXXXX ─┬─ veth ─ netns node 1 (10.K.0.2, pods 10.K.1.0/24)
//	                                                        └─ veth ─ netns node 2 (10.K.0.3, pods 10.K.2.0/24)
//
// The host routes each pod range to its node, so tests reach pods by IP.
// The host does not forward between nodes (its ip_forward stays as it is),
// so a pod reaches pods of its own node, the host and the API server (pod
// traffic leaving a node is masqueraded to the node's address), not pods
// of other nodes.
type realNet struct {
	id     string // realPrefix<pid>-<hex>: the prefix of the nodes' names
	bridge string // realPrefix<hex>, within the 15 bytes of a link name
	octet  int
}

func (n *realNet) hostAddr() netip.Addr { return netip.AddrFrom4([4]byte{10, byte(n.octet), 0, 1}) }

func (n *realNet) nodeAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(n.octet), 0, byte(i + 1)})
}

func (n *realNet) podSubnet(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet), byte(i), 0}), 24)
}

func (n *realNet) clusterCIDR() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(n.octet), 0, 0}), 16)
}

// nodeNamespace is the network namespace (and state folder, and cgroup)
// name of node i.
func (n *realNet) nodeNamespace(i int) *netbed.Namespace {
	return &netbed.Namespace{Name: fmt.Sprintf("%s-%d", n.id, i), Addr: n.nodeAddr(i)}
}

// newRealNet creates the host bridge of a cluster with real nodes on a free
// address block. close removes it.
func newRealNet(ctx context.Context) (*realNet, error) {
	random := make([]byte, 3)
	_, _ = rand.Read(random)
	suffix := hex.EncodeToString(random)
	n := &realNet{id: realPrefix + strconv.Itoa(os.Getpid()) + "-" + suffix, bridge: realPrefix + suffix}
	lock, err := os.OpenFile(realNetLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("real nodes: address lock: %w", err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("real nodes: address lock: %w", err)
	}
	if n.octet, err = freeOctet(ctx); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"ip", "link", "add", n.bridge, "type", "bridge"},
		// The alias names the owner for sweepRealNodes.
		{"ip", "link", "set", "dev", n.bridge, "alias", n.id},
		{"ip", "addr", "add", n.hostAddr().String() + "/24", "dev", n.bridge},
		{"ip", "link", "set", n.bridge, "up"},
	}
	if err := netbed.RunSteps(ctx, steps); err != nil {
		return nil, errors.Join(fmt.Errorf("real nodes: bridge: %w", err), n.close(ctx))
	}
	return n, nil
}

// freeOctet finds an address block no route of the host overlaps.
func freeOctet(ctx context.Context) (int, error) {
	out, err := exec.CommandContext(ctx, "ip", "-4", "-o", "route", "show", "table", "all").Output()
	if err != nil {
		return 0, fmt.Errorf("real nodes: list routes: %w", err)
	}
	var used []netip.Prefix
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		for _, f := range fields {
			if p, err := netip.ParsePrefix(f); err == nil {
				used = append(used, p)
			} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
				used = append(used, netip.PrefixFrom(a, 32))
			}
		}
	}
	for octet := firstOctet; octet <= lastOctet; octet++ {
		block := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(octet), 0, 0}), 16)
		if !overlapsAny(block, used) {
			return octet, nil
		}
	}
	return 0, fmt.Errorf("real nodes: every block 10.%d-%d.0.0/16 is in use on this host", firstOctet, lastOctet)
}

func overlapsAny(p netip.Prefix, others []netip.Prefix) bool {
	for _, o := range others {
		if o.Bits() > 0 && p.Overlaps(o) {
			return true
		}
	}
	return false
}

// addNode links node i's namespace to the bridge and routes its pod range.
func (n *realNet) addNode(ctx context.Context, i int) (*netbed.Namespace, error) {
	ns := n.nodeNamespace(i)
	hostEnd := fmt.Sprintf("%sn%d", n.bridge, i)
	inNS := func(args ...string) []string { return append([]string{"ip", "-n", ns.Name}, args...) }
	steps := [][]string{
		{"ip", "netns", "add", ns.Name},
		inNS("link", "set", "lo", "up"),
		{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", "eth0", "netns", ns.Name},
		{"ip", "link", "set", hostEnd, "master", n.bridge},
		{"ip", "link", "set", hostEnd, "up"},
		inNS("addr", "add", ns.Addr.String()+"/24", "dev", "eth0"),
		inNS("link", "set", "eth0", "up"),
		inNS("route", "add", "default", "via", n.hostAddr().String()),
		{"ip", "route", "add", n.podSubnet(i).String(), "via", ns.Addr.String()},
		// The node routes its pods' traffic out (the CNI bridge masquerades it).
		{"ip", "netns", "exec", ns.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	if err := netbed.RunSteps(ctx, steps); err != nil {
		return nil, fmt.Errorf("real node %s: network: %w", ns.Name, err)
	}
	return ns, nil
}

// close deletes the bridge (its veths and routes go with the namespaces).
func (n *realNet) close(ctx context.Context) error {
	if _, err := os.Stat("/sys/class/net/" + n.bridge); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return netbed.RunSteps(ctx, [][]string{{"ip", "link", "del", n.bridge}})
}

// staleBridges lists the host bridges of real nodes whose test binary is
// gone, by the owner their alias names.
func staleBridges(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-j", "link", "show", "type", "bridge").Output()
	if err != nil {
		return nil, fmt.Errorf("list bridges: %w", err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Alias string `json:"ifalias"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("list bridges: %w", err)
	}
	var stale []string
	for _, l := range links {
		if strings.HasPrefix(l.Name, realPrefix) && netbed.Stale(realPrefix, l.Alias) {
			stale = append(stale, l.Name)
		}
	}
	return stale, nil
}
