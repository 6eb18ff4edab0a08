package netlimit

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr net.Addr
		want string
	}{
		{"IPv4 over UDP", &net.UDPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 443}, "192.0.2.7/32"},
		{"IPv4 over TCP", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 1}, "192.0.2.7/32"},
		{"IPv4-mapped IPv6 is the IPv4 address", &net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7/32"},
		{"IPv6 is grouped by /64", &net.UDPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), Port: 1}, "2001:db8:1:2::/64"},
		{"another address of the same /64", &net.UDPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 9}, "2001:db8:1:2::/64"},
		{"zones do not make new sources", &net.UDPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0"}, "fe80::/64"},
		{"HOST:PORT of another kind", fakeAddr("198.51.100.1:80"), "198.51.100.1/32"},
		{"not an IP: one group for all", fakeAddr("pipe"), "invalid Prefix"},
		{"nil", nil, "invalid Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Source(tc.addr).String(); got != tc.want {
				t.Errorf("Source(%v) = %s, want %s", tc.addr, got, tc.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct {
		src  netip.Prefix
		want string
	}{
		{netip.MustParsePrefix("192.0.2.7/32"), "192.0.2.7"},
		{netip.MustParsePrefix("2001:db8:1:2::/64"), "2001:db8:1:2::/64"},
		{netip.Prefix{}, ""},
	} {
		if got := Name(tc.src); got != tc.want {
			t.Errorf("Name(%v) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestCountsForgetEmptySources(t *testing.T) {
	var c Counts
	a, b := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/64")
	c.Add(a, 1)
	c.Add(a, 1)
	c.Add(b, 1)
	if c.Get(a) != 2 || c.Get(b) != 1 || c.Len() != 2 {
		t.Fatalf("counts a=%d b=%d len=%d, want 2, 1, 2", c.Get(a), c.Get(b), c.Len())
	}
	c.Add(a, -2)
	c.Add(b, -1)
	if c.Len() != 0 {
		t.Errorf("%d sources remembered after all ended, want none", c.Len())
	}
}

func TestThrottle(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	th := NewThrottle(10*time.Second, clk)
	steps := []struct {
		advance  time.Duration
		wantOK   bool
		wantHeld int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{time.Second, false, 0},
		{7 * time.Second, false, 0},
		{time.Second, true, 3}, // 10 s after the first
		{9 * time.Second, false, 0},
		{time.Hour, true, 1},
	}
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		ok, held := th.Allow()
		if ok != s.wantOK || held != s.wantHeld {
			t.Errorf("step %d: Allow() = %v, %d; want %v, %d", i, ok, held, s.wantOK, s.wantHeld)
		}
	}
}

// TestListenerCapsPerSource: connections beyond a source's cap are closed
// at once; others' are not affected; a closed one makes room again.
func TestListenerCapsPerSource(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perSource int
		sources   []string
		refused   []int // indexes closed at once
	}{
		{"under the cap", 2, []string{"192.0.2.1:1", "192.0.2.1:2", "192.0.2.2:1"}, nil},
		{"third of one address", 2, []string{"192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3", "192.0.2.2:1"}, []int{2}},
		{"one IPv6 /64 is one source", 1, []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8:0:1::1]:1"}, []int{1}},
		{"no cap", 0, []string{"192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFakeListener()
			l := NewListener(fl, "test", Limits{MaxConnsPerSource: tc.perSource}, discard(), nil)
			conns := make([]*fakeConn, len(tc.sources))
			for i, s := range tc.sources {
				conns[i] = &fakeConn{remote: fakeAddr(s)}
				fl.conns <- conns[i]
			}
			close(fl.conns) // then Accept fails: everything was taken
			accepted := 0
			for {
				if _, err := l.Accept(); err != nil {
					break
				}
				accepted++
			}
			for i, c := range conns {
				want := slices.Contains(tc.refused, i)
				if c.closed.Load() != want {
					t.Errorf("connection %d from %s closed at once = %v, want %v", i, tc.sources[i], c.closed.Load(), want)
				}
			}
			st := l.Stats()
			if st.Refused != int64(len(tc.refused)) || st.Open != int64(accepted) || accepted != len(conns)-len(tc.refused) {
				t.Errorf("stats %+v after %d accepted, want %d refused", st, accepted, len(tc.refused))
			}
		})
	}
}

// A source at its cap gets a place again once one of its connections
// closes, and a Released one does not count at all.
func TestListenerFreesPlaces(t *testing.T) {
	fl := newFakeListener()
	l := NewListener(fl, "test", Limits{MaxConnsPerSource: 1}, discard(), nil)
	accept := func(remote string) (*fakeConn, net.Conn) {
		t.Helper()
		fc := &fakeConn{remote: fakeAddr(remote)}
		fl.conns <- fc
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return fc, c
	}
	_, first := accept("192.0.2.1:1")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, c := accept("192.0.2.1:2")
	if second.closed.Load() {
		t.Fatal("a connection was refused after its source's only one closed")
	}
	Release(wrapped{c}) // as http.Server hijacking a TLS connection
	third, c3 := accept("192.0.2.1:3")
	if third.closed.Load() {
		t.Fatal("a connection was refused while its source's only other one was released")
	}
	_ = c.Close() // released already: counts nothing again
	_ = c3.Close()
	if st := l.Stats(); st.Open != 0 || st.Refused != 0 {
		t.Errorf("stats %+v, want nothing open or refused", st)
	}
}

// TestListenerWaitsAtMaxConns: at the cap Accept takes nothing more until
// a connection closes; Close ends the wait.
func TestListenerWaitsAtMaxConns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fl := newFakeListener()
		l := NewListener(fl, "test", Limits{MaxConns: 2}, discard(), nil)
		var held []net.Conn
		for i := range 3 {
			fl.conns <- &fakeConn{remote: fakeAddr(fmt.Sprintf("192.0.2.%d:1", i+1))}
		}
		for range 2 {
			c, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		third := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
			}
			third <- c
		}()
		synctest.Wait()
		select {
		case <-third:
			t.Fatal("a third connection was accepted while 2 (the cap) were open")
		default:
		}
		if got := len(fl.conns); got != 1 {
			t.Errorf("%d connections left in the accept queue, want 1: the wait comes before Accept", got)
		}
		_ = held[0].Close()
		c := <-third
		_ = c.Close()
		if st := l.Stats(); st.Waited != 1 || st.Open != 1 {
			t.Errorf("stats %+v, want 1 waited, 1 open", st)
		}

		c4 := &fakeConn{remote: fakeAddr("192.0.2.9:1")}
		fl.conns <- c4
		c, err := l.Accept() // the second place
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		failed := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			failed <- err
		}()
		synctest.Wait()
		_ = l.Close()
		if err := <-failed; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept waiting for a place returned %v after Close, want net.ErrClosed", err)
		}
	})
}

// A connection closed after a read hit its deadline counts as timed out;
// one closed otherwise, or released first, does not.
func TestListenerCountsTimeouts(t *testing.T) {
	fl := newFakeListener()
	l := NewListener(fl, "test", Limits{}, discard(), nil)
	for _, tc := range []struct {
		readErr error
		release bool
	}{
		{readErr: fmt.Errorf("read tcp: %w", os.ErrDeadlineExceeded)}, // counted
		{readErr: io.EOF},
		{readErr: os.ErrDeadlineExceeded, release: true},
	} {
		fl.conns <- &fakeConn{remote: fakeAddr("192.0.2.1:1"), readErr: tc.readErr}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if tc.release {
			Release(c)
		}
		_, _ = c.Read(make([]byte, 1))
		_ = c.Close()
	}
	if st := l.Stats(); st.TimedOut != 1 || st.Open != 0 {
		t.Errorf("stats %+v, want 1 timed out and none open", st)
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

type fakeListener struct{ conns chan net.Conn }

func newFakeListener() *fakeListener { return &fakeListener{conns: make(chan net.Conn, 16)} }

func (f *fakeListener) Accept() (net.Conn, error) {
	c, ok := <-f.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (f *fakeListener) Close() error   { return nil }
func (f *fakeListener) Addr() net.Addr { return fakeAddr("192.0.2.254:443") }

// fakeConn is a connection from remote whose reads fail with readErr.
type fakeConn struct {
	net.Conn // nil: only what is below is called
	remote   net.Addr
	readErr  error
	closed   atomic.Bool
}

func (c *fakeConn) RemoteAddr() net.Addr        { return c.remote }
func (c *fakeConn) Read([]byte) (int, error)    { return 0, c.readErr }
func (c *fakeConn) Close() error                { c.closed.Store(true); return nil }
func (c *fakeConn) SetDeadline(time.Time) error { return nil }

// wrapped wraps a connection as *tls.Conn does.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
