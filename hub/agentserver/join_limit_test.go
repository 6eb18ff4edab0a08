package agentserver

import (
	"fmt"
	"net"
	"testing"
	"time"
)

func TestJoinLimiter(t *testing.T) {
	var l joinLimiter
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	allowed := 0
	var wait time.Duration
	for range 100 {
		ok, w := l.allow("192.0.2.1", now)
		if ok {
			allowed++
		} else {
			wait = w
		}
	}
	if allowed != joinBurst || wait != joinEvery || l.limitedCount() != 100-joinBurst {
		t.Errorf("one address: %d allowed, wait %v, %d limited; want %d, %v, %d", allowed, wait, l.limitedCount(), joinBurst, joinEvery, 100-joinBurst)
	}
	if ok, _ := l.allow("192.0.2.2", now); !ok {
		t.Error("another address was refused")
	}
	if ok, _ := l.allow("192.0.2.1", now.Add(joinEvery)); !ok {
		t.Error("the first address was refused once its wait had passed")
	}
	// Addresses idle long enough are forgotten when the table is full.
	for i := range maxJoinSources {
		l.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
	}
	l.allow("198.51.100.1", now.Add(time.Hour))
	if n := len(l.sources); n > 2 {
		t.Errorf("%d addresses remembered after an hour, want the idle ones forgotten", n)
	}
}

func TestJoinSource(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.UDPAddr{IP: net.ParseIP("192.0.2.7"), Port: 4000}, "192.0.2.7"},
		{&net.UDPAddr{IP: net.ParseIP("::ffff:192.0.2.9"), Port: 4000}, "192.0.2.9"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 4000}, "2001:db8::/64"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8::ffff:1"), Port: 4000}, "2001:db8::/64"},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.8"), Port: 1}, "192.0.2.8"},
	}
	for _, tt := range tests {
		if got := joinSource(tt.addr); got != tt.want {
			t.Errorf("joinSource(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
