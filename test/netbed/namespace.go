package netbed

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Namespace is one named network namespace of a bed.
type Namespace struct {
	Name string     // as `ip netns list` shows it
	Addr netip.Addr // its address on its link towards the router
}

// Command returns the binary and arguments that run bin with args inside
// the namespace. `ip netns exec` execs bin itself, so the process started
// is bin (signals and Pdeathsig reach it).
func (n *Namespace) Command(bin string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.Name, bin}, args...)
}

// EnterCommand is Command for long-running daemons that mount: nsenter
// switches only the network namespace, whereas `ip netns exec` also gives
// bin a private mount namespace, so the mounts of a kubelet (volumes) would
// stay invisible to a containerd started the same way, and to cleanup.
// nsenter execs bin, so the process started is bin.
func (n *Namespace) EnterCommand(bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=/run/netns/" + n.Name, "--", bin}, args...)
}

// Run runs a command inside the namespace and returns its combined output.
func (n *Namespace) Run(ctx context.Context, bin string, args ...string) (string, error) {
	name, argv := n.Command(bin, args...)
	return run(ctx, name, argv...)
}

// Listen opens a TCP listener inside the namespace.
func (n *Namespace) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// ListenPacket opens a UDP socket inside the namespace.
func (n *Namespace) ListenPacket(addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.do(func() (err error) {
		c, err = net.ListenPacket("udp", addr)
		return err
	})
	return c, err
}

// Dial connects from inside the namespace ("tcp" or "udp").
func (n *Namespace) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// do runs f on an OS thread switched into the namespace. A socket keeps the
// namespace it was created in, so f's sockets live there; the thread
// switches back before it is released. If it cannot switch back, the
// thread stays locked and the Go runtime ends it with the goroutine.
func (n *Namespace) do(f func() error) error {
	if n == nil { // the host's own namespace
		return f()
	}
	target, err := os.Open(filepath.Join("/run/netns", n.Name))
	if err != nil {
		return fmt.Errorf("namespace %s: %w", n.Name, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() { // a fresh goroutine: its locked thread may be thrown away
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("own network namespace: %w", err)
			return
		}
		defer home.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", n.Name, err)
			return
		}
		ferr := f()
		if err := setns(home); err != nil {
			errc <- fmt.Errorf("leave namespace %s: %w", n.Name, err) // thread stays locked: discarded
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// RunSteps runs commands (each a program and its arguments) in order and
// stops at the first failure, with its output in the error.
func RunSteps(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if _, err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// run runs a command and returns its combined output, with the output in
// the error when it fails.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
