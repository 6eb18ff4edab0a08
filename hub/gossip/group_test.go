package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/test/freeport"
)

var testKey = bytes.Repeat([]byte{7}, 32)

// member starts a member on a free loopback port, joining join, whose
// messages arrive on the returned channel.
func member(t *testing.T, name, label string, key []byte, join ...string) (*Group, <-chan string) {
	t.Helper()
	got := make(chan string, 16)
	g, err := Start(Config{Name: name, BindAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), Join: join, JoinRetry: 100 * time.Millisecond,
		Key: key, Label: label, SendTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
		Receive: func(msg []byte) { got <- string(msg) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run(g))
	return g, got
}

// run runs g until the returned function is called, which waits for it
// to leave; calling it again does nothing.
func run(g *Group) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.TCPAndUDP()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// until waits for cond, checking every 20 ms, for at most 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case msg := <-ch:
		return msg
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
		return ""
	}
}

func TestMembersJoinAndSend(t *testing.T) {
	a, gotA := member(t, "a", "flotilla-hub", testKey)
	b, gotB := member(t, "b", "flotilla-hub", testKey, a.Addr())
	c, gotC := member(t, "c", "flotilla-hub", testKey, a.Addr(), b.Addr())
	for _, g := range []*Group{a, b, c} {
		until(t, g.cfg.Name+" sees 3 members", func() bool { return g.Members() == 3 })
	}
	if n, err := a.SendToOthers([]byte("table from a")); n != 2 || err != nil {
		t.Fatalf("SendToOthers = %d, %v; want 2, nil", n, err)
	}
	for _, ch := range []<-chan string{gotB, gotC} {
		if msg := receive(t, ch); msg != "table from a" {
			t.Errorf("received %q", msg)
		}
	}
	select {
	case msg := <-gotA:
		t.Errorf("the sender received its own message %q", msg)
	default:
	}
}

func TestStrangersDoNotJoin(t *testing.T) {
	a, _ := member(t, "a", "flotilla-hub", testKey)
	tests := []struct {
		name, label string
		key         []byte
	}{
		{"another key", "flotilla-hub", bytes.Repeat([]byte{8}, 32)},
		{"another label", "another-hub", testKey},
		{"no key", "flotilla-hub", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := member(t, "stranger", tt.label, tt.key)
			if n, err := s.ml.Join([]string{a.Addr()}); n != 0 || err == nil {
				t.Errorf("Join = %d, %v; want refused", n, err)
			}
			if a.Members() != 1 || s.Members() != 1 {
				t.Errorf("members: a %d, stranger %d; want 1 each", a.Members(), s.Members())
			}
		})
	}
}

func TestALeavingMemberIsNoticed(t *testing.T) {
	a, _ := member(t, "a", "flotilla-hub", testKey)
	b, err := Start(Config{Name: "b", BindAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), Join: []string{a.Addr()},
		JoinRetry: 100 * time.Millisecond, Key: testKey, Label: "flotilla-hub", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(b)
	until(t, "a sees b", func() bool { return a.Members() == 2 })
	stop()
	until(t, "a sees b gone", func() bool { return a.Members() == 1 })
	if n, err := a.SendToOthers([]byte("x")); n != 0 || err != nil {
		t.Errorf("SendToOthers with nobody else = %d, %v", n, err)
	}
}

func TestStartRefusesBadAddresses(t *testing.T) {
	for _, addr := range []string{"nohostport", "127.0.0.1:http", "127.0.0.1:70000"} {
		if _, err := Start(Config{Name: "x", BindAddr: addr, Key: testKey, Logger: slog.New(slog.DiscardHandler)}); err == nil {
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
}

func TestLevelWriter(t *testing.T) {
	var buf bytes.Buffer
	w := levelWriter{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))}
	for _, line := range []string{"[WARN] memberlist: refuting a suspect message\n", "[DEBUG] memberlist: stream connection\n", "plain\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	want := "level=WARN msg=\"memberlist: refuting a suspect message\"\nlevel=DEBUG msg=\"memberlist: stream connection\"\nlevel=INFO msg=plain\n"
	if buf.String() != want {
		t.Errorf("logged:\n%s\nwant:\n%s", buf.String(), want)
	}
}
