package netlimit

import (
	"net"
	"net/netip"
)

// ipv6Group is how many leading bits of an IPv6 address name one source:
// a site is given a /64 at least, and picks any address inside it.
const ipv6Group = 64

// Source is the group of addresses addr counts against: its IPv4 address
// (IPv4-mapped IPv6 included), or its IPv6 /64. An address that is not an
// IP (a test's pipe) yields the zero Prefix, one group for all of them.
func Source(addr net.Addr) netip.Prefix {
	ip, ok := addrIP(addr)
	if !ok {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = ipv6Group
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// Name is how a person reads src: an IPv4 address without its /32, an
// IPv6 /64 as a prefix; "" for the zero Prefix.
func Name(src netip.Prefix) string {
	switch {
	case !src.IsValid():
		return ""
	case src.Addr().Is4():
		return src.Addr().String()
	}
	return src.String()
}

// addrIP is the IP of a UDP or TCP address, or of any HOST:PORT.
func addrIP(addr net.Addr) (netip.Addr, bool) {
	switch a := addr.(type) {
	case *net.UDPAddr:
		return netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		return netip.AddrFromSlice(a.IP)
	case nil:
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr(), true
}

// Counts are what each source holds now. The zero value is empty and
// ready; it is not safe for concurrent use (its owner locks). A source
// whose count drops to zero is forgotten, so Counts never hold more
// entries than the owner admitted.
type Counts struct{ m map[netip.Prefix]int }

// Get is what src holds.
func (c *Counts) Get(src netip.Prefix) int { return c.m[src] }

// Add changes what src holds by delta.
func (c *Counts) Add(src netip.Prefix, delta int) {
	n := c.m[src] + delta
	if n <= 0 {
		delete(c.m, src)
		return
	}
	if c.m == nil {
		c.m = map[netip.Prefix]int{}
	}
	c.m[src] = n
}

// Len is how many sources hold anything.
func (c *Counts) Len() int { return len(c.m) }
