package netbed

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func namespaceList(t *testing.T) string {
	t.Helper()
	out, err := run(t.Context(), "ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildCloseAndSweep: a bed's namespaces exist until Close; Sweep
// removes those of a dead test binary and leaves those of live ones.
func TestBuildCloseAndSweep(t *testing.T) {
	if err := Require(); err != nil {
		t.Fatal(err)
	}
	b, err := Build(2)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{b.ID() + "-cloud", b.ID() + "-router", b.ID() + "-edge1", b.ID() + "-edge2"}
	list := namespaceList(t)
	for _, n := range names {
		if !strings.Contains(list, n) {
			t.Errorf("namespace %s missing from:\n%s", n, list)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	list = namespaceList(t)
	for _, n := range names {
		if strings.Contains(list, n) {
			t.Errorf("namespace %s left after Close:\n%s", n, list)
		}
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := namePrefix + strconv.Itoa(dead.Process.Pid) + "-000000-cloud"
	live := namePrefix + strconv.Itoa(os.Getpid()) + "-000000-cloud"
	for _, n := range []string{leftover, live} {
		if _, err := run(t.Context(), "ip", "netns", "add", n); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = run(context.Background(), "ip", "netns", "del", live) })
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	list = namespaceList(t)
	if strings.Contains(list, leftover) || !strings.Contains(list, live) {
		t.Errorf("after Sweep, want %s gone and %s kept:\n%s", leftover, live, list)
	}
}

// exchange sends a UDP datagram from an edge to a socket in the cloud and
// answers it; it returns the source the cloud saw.
func exchange(t *testing.T, edge net.Conn, cloud net.PacketConn) netip.AddrPort {
	t.Helper()
	if _, err := edge.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = cloud.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := cloud.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("cloud read %q: %v", buf[:n], err)
	}
	if _, err := cloud.WriteTo([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	_ = edge.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := edge.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("edge read %q: %v", buf[:n], err)
	}
	return from.(*net.UDPAddr).AddrPort()
}

// TestNAT: edge traffic reaches the cloud from the router's public
// address and is answered; the router tracks the mapping; Rebind moves
// the flow to the other public address and a new port.
func TestNAT(t *testing.T) {
	b := New(t, 2)
	cloud, err := b.Cloud.ListenPacket(CloudAddr.String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	for i, e := range b.Edges {
		conn, err := e.Dial(t.Context(), "udp", cloud.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		seen := exchange(t, conn, cloud)
		if seen.Addr() != PublicAddrs[0] {
			t.Errorf("edge %d: the cloud saw %v, want the router's %v", i+1, seen, PublicAddrs[0])
		}
		ms, err := b.UDPMappings(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		inside := conn.LocalAddr().(*net.UDPAddr).AddrPort()
		want := Mapping{Inside: inside, Remote: cloud.LocalAddr().(*net.UDPAddr).AddrPort(), Public: seen, Replied: true}
		var got *Mapping
		for _, m := range ms {
			if m.Inside == inside {
				m.Expires = 0
				got = &m
			}
		}
		if got == nil || want != *got {
			t.Errorf("edge %d: router mapping %+v, want %+v (all: %+v)", i+1, got, want, ms)
		}

	}
	conn, err := b.Edges[0].Dial(t.Context(), "udp", cloud.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	seen := exchange(t, conn, cloud)
	addr, err := b.Rebind(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	again := exchange(t, conn, cloud)
	if addr != PublicAddrs[1] || again.Addr() != addr || again.Port() < 30000 || again.Port() >= 40000 {
		t.Errorf("after Rebind to %v the cloud saw %v (before %v), want %v with a port in 30000-39999", addr, again, seen, PublicAddrs[1])
	}
}

// TestCloudCannotReachEdge: the cloud has no route into the edge LAN,
// and even with one the router forwards nothing it did not see go out.
func TestCloudCannotReachEdge(t *testing.T) {
	b := New(t, 1)
	edge := b.Edges[0]
	l, err := edge.Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	target := netip.AddrPortFrom(edge.Addr, uint16(l.Addr().(*net.TCPAddr).Port)).String()
	dial := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		c, err := b.Cloud.Dial(ctx, "tcp", target)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err == nil || !strings.Contains(err.Error(), "network is unreachable") {
		t.Errorf("cloud → edge %s without a route: %v, want network unreachable", target, err)
	}
	if _, err := b.Cloud.Run(t.Context(), "ip", "route", "add", "10.1.0.0/16", "via", PublicAddrs[0].String()); err != nil {
		t.Fatal(err)
	}
	var timeout net.Error
	if err := dial(); !errors.As(err, &timeout) || !timeout.Timeout() {
		t.Errorf("cloud → edge %s through the router: %v, want it dropped (timeout)", target, err)
	}
	// The edge itself is reachable on its own link: the listener works.
	c, err := edge.Dial(t.Context(), "tcp", target)
	if err != nil {
		t.Fatalf("edge → itself: %v", err)
	}
	c.Close()
}

// TestUDPTimeout: the router's UDP timeout is its own (the host keeps
// its value), and a mapping idle longer than it is forgotten: the cloud's
// answer to it no longer reaches the edge.
func TestUDPTimeout(t *testing.T) {
	b := New(t, 1)
	host, err := run(t.Context(), "sysctl", "-n", "net.netfilter.nf_conntrack_udp_timeout_stream")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetUDPTimeout(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"net.netfilter.nf_conntrack_udp_timeout", "net.netfilter.nf_conntrack_udp_timeout_stream"} {
		if got, err := b.Router.Run(t.Context(), "sysctl", "-n", key); err != nil || strings.TrimSpace(got) != "2" {
			t.Errorf("router %s = %q (%v), want 2", key, got, err)
		}
	}
	if after, _ := run(t.Context(), "sysctl", "-n", "net.netfilter.nf_conntrack_udp_timeout_stream"); after != host {
		t.Errorf("the host's udp_timeout_stream changed from %q to %q: not per namespace", host, after)
	}
	if err := b.SetUDPTimeout(t.Context(), 0); err == nil {
		t.Error("SetUDPTimeout(0) accepted")
	}

	cloud, err := b.Cloud.ListenPacket(CloudAddr.String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	conn, err := b.Edges[0].Dial(t.Context(), "udp", cloud.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mapped := exchange(t, conn, cloud)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms, err := b.UDPMappings(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mappings still tracked 10 s after a 2 s timeout: %+v", ms)
		}
		time.Sleep(100 * time.Millisecond) // polling the kernel's table
	}
	if _, err := cloud.WriteTo([]byte("late"), net.UDPAddrFromAddrPort(mapped)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 16)
	if n, err := conn.Read(buf); err == nil {
		t.Errorf("the edge got %q through an expired mapping", buf[:n])
	}
}

// TestForward: a port inside an edge site reaches a server on the host.
func TestForward(t *testing.T) {
	b := New(t, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c) // echo
	}()
	addr, err := b.Forward(b.Edges[0], "127.0.0.1:0", nil, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Edges[0].Dial(t.Context(), "tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Errorf("echo through the forward: %q %v", buf, err)
	}
	// The host's port is not the edge's: nothing listens there on the host.
	if c, err := net.Dial("tcp", addr.String()); err == nil {
		c.Close()
		t.Errorf("%s answers on the host too; the forward should listen only inside the edge", addr)
	}
}

func TestParseMapping(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		line string
		want Mapping
		ok   bool
	}{
		{"udp      17 29 src=10.1.1.2 dst=198.51.100.2 sport=40000 dport=7443 [UNREPLIED] src=198.51.100.2 dst=198.51.100.1 sport=7443 dport=40001 mark=0 use=1",
			Mapping{Inside: ap("10.1.1.2:40000"), Remote: ap("198.51.100.2:7443"), Public: ap("198.51.100.1:40001"), Expires: 29 * time.Second}, true},
		{"udp      17 118 src=10.1.1.2 dst=198.51.100.2 sport=5 dport=7 src=198.51.100.2 dst=198.51.100.3 sport=7 dport=30000 [ASSURED] mark=0 use=1",
			Mapping{Inside: ap("10.1.1.2:5"), Remote: ap("198.51.100.2:7"), Public: ap("198.51.100.3:30000"), Replied: true, Expires: 118 * time.Second}, true},
		{"conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.", Mapping{}, false},
		{"tcp      6 10 ESTABLISHED src=1.2.3.4", Mapping{}, false},
		{"udp 17 x src=1.2.3.4", Mapping{}, false},
	}
	for _, tt := range tests {
		got, ok := parseMapping(tt.line)
		if ok != tt.ok || (ok && tt.want != got) {
			t.Errorf("parseMapping(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// cloudUDP listens for UDP in the bed's cloud and dials it from every edge
// site, with one exchange each so that the router maps them. All are
// closed when the test ends.
func cloudUDP(t *testing.T, b *Bed) (cloud net.PacketConn, edges []net.Conn) {
	t.Helper()
	cloud, err := b.Cloud.ListenPacket(CloudAddr.String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cloud.Close() })
	for _, e := range b.Edges {
		conn, err := e.Dial(t.Context(), "udp", cloud.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		exchange(t, conn, cloud)
		edges = append(edges, conn)
	}
	return cloud, edges
}

// send writes n datagrams from edge to cloud and returns how many the
// cloud read before a quiet half second.
func send(t *testing.T, edge net.Conn, cloud net.PacketConn, n int) int {
	t.Helper()
	for range n {
		if _, err := edge.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, 16)
	for {
		_ = cloud.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, _, err := cloud.ReadFrom(buf); err != nil {
			return got
		}
		got++
	}
}

// TestLossAndLink: SetLoss drops about its share of an edge site's
// packets and counts them, 0 ends it; SetLink down loses everything of
// that site only, and up restores it.
func TestLossAndLink(t *testing.T) {
	b := New(t, 2)
	cloud, edges := cloudUDP(t, b)
	const n = 400
	if err := b.SetLoss(t.Context(), 1, 50); err != nil {
		t.Fatal(err)
	}
	got := send(t, edges[0], cloud, n)
	dropped, err := b.Dropped(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// 50 % of 400: 200 ± 10 (one standard deviation); 6 of them either way.
	if got < 140 || got > 260 || got+dropped != n {
		t.Errorf("50%% loss: %d of %d arrived, %d counted dropped", got, n, dropped)
	}
	if other := send(t, edges[1], cloud, 50); other != 50 {
		t.Errorf("edge 2 under edge 1's loss: %d of 50 arrived", other)
	}
	if err := b.SetLoss(t.Context(), 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := send(t, edges[0], cloud, 50); got != 50 {
		t.Errorf("after the loss ended: %d of 50 arrived", got)
	}

	if err := b.SetLink(t.Context(), 1, false); err != nil {
		t.Fatal(err)
	}
	if got := send(t, edges[0], cloud, 20); got != 0 {
		t.Errorf("link down: %d of 20 arrived", got)
	}
	if other := send(t, edges[1], cloud, 20); other != 20 {
		t.Errorf("edge 2 while edge 1's link is down: %d of 20 arrived", other)
	}
	if err := b.SetLink(t.Context(), 1, true); err != nil {
		t.Fatal(err)
	}
	// The kernel passes traffic on a link that came up once its link
	// watch has run (up to a second later).
	up := time.Now()
	for got := 0; got < 20; got = send(t, edges[0], cloud, 20) {
		if time.Since(up) > 5*time.Second {
			t.Fatalf("link up again: %d of 20 arrive %v later", got, time.Since(up))
		}
	}
	t.Logf("traffic passes %v after the link came up", time.Since(up).Round(time.Millisecond))
	if err := b.SetLoss(t.Context(), 3, 10); err == nil {
		t.Errorf("loss on edge 3 of a two-site bed: no error")
	}
}

// TestBlockUDP: with UDP blocked at the router, an edge site's UDP gets
// nowhere while its TCP still does, and other sites are untouched;
// unblocked, UDP passes again.
func TestBlockUDP(t *testing.T) {
	b := New(t, 2)
	cloud, edges := cloudUDP(t, b)
	tcp, err := b.Cloud.Listen(CloudAddr.String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := b.BlockUDP(t.Context(), 1, true); err != nil {
		t.Fatal(err)
	}
	if got := send(t, edges[0], cloud, 20); got != 0 {
		t.Errorf("UDP blocked: %d of 20 arrived", got)
	}
	if other := send(t, edges[1], cloud, 20); other != 20 {
		t.Errorf("edge 2 while edge 1's UDP is blocked: %d of 20 arrived", other)
	}
	c, err := b.Edges[0].Dial(t.Context(), "tcp", tcp.Addr().String())
	if err != nil {
		t.Errorf("TCP while UDP is blocked: %v", err)
	} else {
		c.Close()
	}
	if err := b.BlockUDP(t.Context(), 1, false); err != nil {
		t.Fatal(err)
	}
	if got := send(t, edges[0], cloud, 20); got != 20 {
		t.Errorf("UDP unblocked: %d of 20 arrived", got)
	}
	if err := b.BlockUDP(t.Context(), 3, true); err == nil {
		t.Error("UDP blocked on edge 3 of a two-site bed: no error")
	}
}

// TestDelayRelay: datagrams through a relay in the edge site reach the
// cloud from the router's address, each way held for the delay plus up to
// the jitter.
func TestDelayRelay(t *testing.T) {
	b := New(t, 1)
	cloud, err := b.Cloud.ListenPacket(CloudAddr.String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.Close()
	r, err := b.DelayRelay(b.Edges[0], "127.0.0.1:0", b.Edges[0], cloud.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := b.Edges[0].Dial(t.Context(), "udp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if seen := exchange(t, conn, cloud); seen.Addr() != PublicAddrs[0] {
		t.Errorf("through the relay the cloud saw %v, want the router's %v", seen, PublicAddrs[0])
	}
	for _, tc := range []struct{ delay, jitter time.Duration }{
		{100 * time.Millisecond, 0},
		{50 * time.Millisecond, 100 * time.Millisecond},
	} {
		r.SetDelay(tc.delay, tc.jitter)
		var least, most time.Duration
		for i := range 10 {
			start := time.Now()
			exchange(t, conn, cloud)
			rtt := time.Since(start)
			if i == 0 || rtt < least {
				least = rtt
			}
			most = max(most, rtt)
		}
		// Both ways held: at least twice the delay, at most twice the
		// delay and the jitter, and a little for the exchange itself.
		if least < 2*tc.delay || most > 2*(tc.delay+tc.jitter)+50*time.Millisecond {
			t.Errorf("delay %v, jitter %v: round trips %v to %v", tc.delay, tc.jitter, least, most)
		}
		t.Logf("delay %v, jitter %v: round trips %v to %v", tc.delay, tc.jitter, least.Round(time.Millisecond), most.Round(time.Millisecond))
	}
	if relayed, dropped := r.Counts(); relayed != 42 || dropped != 0 {
		t.Errorf("relayed %d, dropped %d; want 42 and 0", relayed, dropped)
	}
}
