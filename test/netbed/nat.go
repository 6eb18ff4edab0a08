package netbed

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Rebind changes the router's mapping of every edge flow, as a NAT does
// when it reboots, loses its state or moves to another public address: the
// masquerade rule is replaced by SNAT to the other public address with a
// port range of its own, and the connection tracking table is flushed, so
// the next packet of each flow leaves from a new address and port. Packets
// the cloud sends to the old mapping are dropped. It returns the new public
// address.
func (b *Bed) Rebind(ctx context.Context) (netip.Addr, error) {
	b.mu.Lock()
	b.rebinds++
	n := b.rebinds
	b.mu.Unlock()
	addr := PublicAddrs[n%len(PublicAddrs)]
	low := 20000 + (n%4)*10000
	to := fmt.Sprintf("%s:%d-%d", addr, low, low+9999)
	// A port range needs a protocol: UDP gets one, the rest only the address.
	steps := [][]string{
		{"iptables", "-w", "-t", "nat", "-F", "POSTROUTING"},
		{"iptables", "-w", "-t", "nat", "-A", "POSTROUTING", "-o", "wan0", "-p", "udp", "-j", "SNAT", "--to-source", to},
		{"iptables", "-w", "-t", "nat", "-A", "POSTROUTING", "-o", "wan0", "-j", "SNAT", "--to-source", addr.String()},
		{"conntrack", "-F"},
	}
	for _, s := range steps {
		if _, err := b.Router.Run(ctx, s[0], s[1:]...); err != nil {
			return netip.Addr{}, fmt.Errorf("netbed: rebind: %w", err)
		}
	}
	return addr, nil
}

// SetUDPTimeout makes the router forget a UDP mapping after d without
// packets, whether or not the cloud has answered on it (Linux's
// nf_conntrack_udp_timeout and _stream, which are per network namespace).
func (b *Bed) SetUDPTimeout(ctx context.Context, d time.Duration) error {
	secs := strconv.Itoa(int(d / time.Second))
	if d < time.Second {
		return fmt.Errorf("netbed: UDP timeout %v: want at least 1s", d)
	}
	for _, key := range []string{"net.netfilter.nf_conntrack_udp_timeout", "net.netfilter.nf_conntrack_udp_timeout_stream"} {
		if _, err := b.Router.Run(ctx, "sysctl", "-qw", key+"="+secs); err != nil {
			return fmt.Errorf("netbed: %w", err)
		}
	}
	return nil
}

// Mapping is one UDP flow the router tracks.
type Mapping struct {
	Inside  netip.AddrPort // the edge's source
	Remote  netip.AddrPort // where it goes
	Public  netip.AddrPort // the source the cloud sees
	Replied bool           // the cloud has answered on it
	Expires time.Duration  // left before the router forgets it
}

// UDPMappings lists the UDP flows the router tracks from the edge to the
// cloud.
func (b *Bed) UDPMappings(ctx context.Context) ([]Mapping, error) {
	out, err := b.Router.Run(ctx, "conntrack", "-L", "-p", "udp")
	if err != nil {
		return nil, fmt.Errorf("netbed: %w", err)
	}
	var ms []Mapping
	for _, line := range strings.Split(out, "\n") {
		if m, ok := parseMapping(line); ok {
			ms = append(ms, m)
		}
	}
	return ms, nil
}

// parseMapping reads one line of `conntrack -L -p udp`:
//
//	udp 17 29 src=10.1.1.2 dst=198.51.100.2 sport=5 dport=7 [UNREPLIED] src=198.51.100.2 dst=198.51.100.1 sport=7 dport=5 mark=0 use=1
func parseMapping(line string) (Mapping, bool) {
	fields := strings.Fields(line)
	if len(fields) < 3 || fields[0] != "udp" {
		return Mapping{}, false
	}
	secs, err := strconv.Atoi(fields[2])
	if err != nil {
		return Mapping{}, false
	}
	kv := map[string][]string{}
	m := Mapping{Expires: time.Duration(secs) * time.Second, Replied: true}
	for _, f := range fields[3:] {
		if f == "[UNREPLIED]" {
			m.Replied = false
		}
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = append(kv[k], v)
		}
	}
	addrPort := func(addrKey string, portKey string, i int) (netip.AddrPort, bool) {
		if len(kv[addrKey]) <= i || len(kv[portKey]) <= i {
			return netip.AddrPort{}, false
		}
		a, err := netip.ParseAddr(kv[addrKey][i])
		p, perr := strconv.ParseUint(kv[portKey][i], 10, 16)
		return netip.AddrPortFrom(a, uint16(p)), err == nil && perr == nil
	}
	var ok1, ok2, ok3 bool
	m.Inside, ok1 = addrPort("src", "sport", 0)
	m.Remote, ok2 = addrPort("dst", "dport", 0)
	m.Public, ok3 = addrPort("dst", "dport", 1) // the reply goes to the mapping
	return m, ok1 && ok2 && ok3
}
