package netbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Addresses of every bed (namespaces keep beds apart, so they repeat).
var (
	CloudAddr = netip.MustParseAddr("198.51.100.2") // the hub's side
	// PublicAddrs are the router's WAN addresses: edge traffic leaves
	// from the first one until Rebind moves it.
	PublicAddrs = []netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.3")}
)

// EdgeAddr is the address of edge site i (1-based) on its LAN link.
func EdgeAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i), 2}) }

// namePrefix starts every namespace a bed creates; the pid after it lets
// Sweep tell leftovers of dead test binaries from live beds.
const namePrefix = "flnb"

// setupTimeout bounds each command that builds or removes a bed.
const setupTimeout = 30 * time.Second

// Bed is one network: a cloud namespace, a NAT router and edge sites.
type Bed struct {
	Cloud  *Namespace
	Router *Namespace
	Edges  []*Namespace // Edges[i] is site i+1, at EdgeAddr(i+1)

	id string // flnb<pid>-<random>

	mu       sync.Mutex
	rebinds  int
	closers  []func()
	forwards sync.WaitGroup
	closed   bool
}

// New builds a bed with edges edge sites for a test and removes it when
// the test ends. It first sweeps the leftovers of killed test runs. It
// fails the test when the machine cannot build one (not root, tools
// missing), naming what is missing.
func New(t testing.TB, edges int) *Bed {
	t.Helper()
	if err := Require(); err != nil {
		t.Fatal(err)
	}
	if err := Sweep(); err != nil {
		t.Logf("netbed: sweeping leftovers: %v", err)
	}
	b, err := Build(edges)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("netbed: %v", err)
		}
	})
	return b
}

// Require reports what this machine lacks to build a bed.
func Require() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces, veth links and iptables need it; run the tests as root)")
	}
	for tool, pkg := range map[string]string{"ip": "iproute2", "iptables": "iptables", "conntrack": "conntrack", "sysctl": "procps"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", tool, pkg))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("netbed: this machine lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// Build creates a bed with edges edge sites (1 to 250). Close removes it.
func Build(edges int) (*Bed, error) {
	if edges < 1 || edges > 250 {
		return nil, fmt.Errorf("netbed: %d edge sites, want 1 to 250", edges)
	}
	random := make([]byte, 3)
	_, _ = rand.Read(random)
	b := &Bed{id: namePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(random)}
	b.Cloud = &Namespace{Name: b.id + "-cloud", Addr: CloudAddr}
	b.Router = &Namespace{Name: b.id + "-router", Addr: PublicAddrs[0]}
	for i := 1; i <= edges; i++ {
		b.Edges = append(b.Edges, &Namespace{Name: fmt.Sprintf("%s-edge%d", b.id, i), Addr: EdgeAddr(i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := b.build(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("netbed: build: %w", err), b.Close())
	}
	return b, nil
}

// ID is the prefix of the bed's namespace names.
func (b *Bed) ID() string { return b.id }

func (b *Bed) build(ctx context.Context) error {
	r := b.Router.Name
	steps := [][]string{}
	for _, n := range b.namespaces() {
		steps = append(steps, []string{"ip", "netns", "add", n.Name}, []string{"ip", "-n", n.Name, "link", "set", "lo", "up"})
	}
	steps = append(steps,
		[]string{"ip", "-n", r, "link", "add", "wan0", "type", "veth", "peer", "name", "eth0", "netns", b.Cloud.Name},
		[]string{"ip", "-n", r, "addr", "add", PublicAddrs[0].String() + "/24", "dev", "wan0"},
		[]string{"ip", "-n", r, "addr", "add", PublicAddrs[1].String() + "/24", "dev", "wan0"},
		[]string{"ip", "-n", r, "link", "set", "wan0", "up"},
		[]string{"ip", "-n", b.Cloud.Name, "addr", "add", CloudAddr.String() + "/24", "dev", "eth0"},
		[]string{"ip", "-n", b.Cloud.Name, "link", "set", "eth0", "up"},
	)
	for i, e := range b.Edges {
		lan := fmt.Sprintf("lan%d", i+1)
		gw := netip.AddrFrom4([4]byte{10, 1, byte(i + 1), 1}).String()
		steps = append(steps,
			[]string{"ip", "-n", r, "link", "add", lan, "type", "veth", "peer", "name", "eth0", "netns", e.Name},
			[]string{"ip", "-n", r, "addr", "add", gw + "/24", "dev", lan},
			[]string{"ip", "-n", r, "link", "set", lan, "up"},
			[]string{"ip", "-n", e.Name, "addr", "add", e.Addr.String() + "/24", "dev", "eth0"},
			[]string{"ip", "-n", e.Name, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", e.Name, "route", "add", "default", "via", gw},
		)
	}
	ipt := func(args ...string) []string {
		return append([]string{"ip", "netns", "exec", r, "iptables", "-w"}, args...)
	}
	steps = append(steps,
		[]string{"ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		// A home router: the LAN may go out, and only answers come in.
		ipt("-P", "FORWARD", "DROP"),
		ipt("-A", "FORWARD", "-i", "lan+", "-o", "wan0", "-j", "ACCEPT"),
		ipt("-A", "FORWARD", "-i", "wan0", "-o", "lan+", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"),
		// MASQUERADE takes wan0's primary address, PublicAddrs[0].
		ipt("-t", "nat", "-A", "POSTROUTING", "-o", "wan0", "-j", "MASQUERADE"),
	)
	return RunSteps(ctx, steps)
}

func (b *Bed) namespaces() []*Namespace {
	return append([]*Namespace{b.Cloud, b.Router}, b.Edges...)
}

// Close stops the bed's forwarders and deletes its namespaces (and with
// them their links, addresses and rules). Processes still running inside
// keep their namespace alive, unnamed, until they end.
func (b *Bed) Close() error {
	b.mu.Lock()
	closers := b.closers
	b.closers, b.closed = nil, true
	b.mu.Unlock()
	for _, c := range closers {
		c()
	}
	b.forwards.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	var errs []error
	for _, n := range b.namespaces() {
		if _, err := os.Stat("/run/netns/" + n.Name); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "del", n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sweep deletes the namespaces of beds whose test binary is gone (killed
// before its cleanup ran). Beds of live processes are left alone, so
// parallel test binaries do not disturb each other.
func Sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !Stale(namePrefix, name) {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stale reports whether name is prefix<pid>-... and that process is gone:
// the leftover of a test binary killed before its cleanup. Other harnesses
// (test/membercluster's real nodes) name what they create the same way.
func Stale(prefix, name string) bool {
	pid, ok := ownerPid(prefix, name)
	return ok && !processExists(pid)
}

// ownerPid parses prefix<pid>-... names.
func ownerPid(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// processExists reports whether pid runs; a zombie (killed, not yet
// reaped) counts as gone.
func processExists(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
