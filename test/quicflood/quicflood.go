// Package quicflood sends QUIC Initial packets that go no further, as a
// flood from spoofed source addresses would: each comes from a socket of
// its own, which sends the first packet of a real client's handshake and
// then neither sends nor reads anything, so it never answers the server
// (nor a Retry). Tests use it to see what such packets hold of the hub.
package quicflood

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/sync/errgroup"
)

// parallel is how many Initials are being made at once.
const parallel = 16

// Send sends n Initial packets to target, the i-th from source(i) (an IP
// to bind to, e.g. one of 127.0.0.0/8 to play a spoofed address; nil:
// 127.0.0.1), each from its own port, and returns once all were sent,
// with how long that took.
func Send(ctx context.Context, target string, n int, source func(i int) net.IP, alpn string) (time.Duration, error) {
	to, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return 0, fmt.Errorf("resolve %s: %w", target, err)
	}
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		ip := net.IPv4(127, 0, 0, 1)
		if source != nil {
			ip = source(i)
		}
		g.Go(func() error { return sendOne(ctx, to, ip, alpn) })
	}
	err = g.Wait()
	return time.Since(start), err
}

// sendOne lets a QUIC client start a handshake from ip and stops it once
// its first packet is out.
func sendOne(ctx context.Context, to *net.UDPAddr, ip net.IP, alpn string) error {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip})
	if err != nil {
		return fmt.Errorf("listen on %s: %w", ip, err)
	}
	c := &oneShotConn{udp: udp, sent: make(chan struct{}), closed: make(chan struct{})}
	dialCtx, cancel := context.WithCancel(ctx)
	dialed := make(chan struct{})
	go func() {
		defer close(dialed)
		// No certificate is checked: the handshake never gets that far.
		conf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{alpn}}
		_, _ = quic.Dial(dialCtx, c, to, conf, &quic.Config{})
	}()
	// The client's transport stops once its reads end: close first.
	defer func() { cancel(); _ = c.Close(); <-dialed }()
	select {
	case <-c.sent:
		return c.err
	case <-dialed:
		return errors.New("the QUIC client sent nothing")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// oneShotConn passes on the first datagram written to it and drops the
// rest; it reads nothing until it is closed. It wraps a *net.UDPConn
// without embedding it, so quic-go uses these methods and no others.
type oneShotConn struct {
	udp       *net.UDPConn
	once      sync.Once
	sent      chan struct{}
	err       error // the first write's
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *oneShotConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	first := false
	c.once.Do(func() {
		first = true
		_, c.err = c.udp.WriteTo(b, addr)
		close(c.sent)
	})
	if first && c.err != nil {
		return 0, c.err
	}
	return len(b), nil
}

func (c *oneShotConn) ReadFrom([]byte) (int, net.Addr, error) {
	<-c.closed
	return 0, nil, net.ErrClosed
}

func (c *oneShotConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.udp.Close()
}

func (c *oneShotConn) LocalAddr() net.Addr                { return c.udp.LocalAddr() }
func (c *oneShotConn) SetDeadline(t time.Time) error      { return c.udp.SetDeadline(t) }
func (c *oneShotConn) SetReadDeadline(t time.Time) error  { return c.udp.SetReadDeadline(t) }
func (c *oneShotConn) SetWriteDeadline(t time.Time) error { return c.udp.SetWriteDeadline(t) }

// SetReadBuffer does nothing: the socket reads nothing (quic-go asks).
func (c *oneShotConn) SetReadBuffer(int) error { return nil }

// SetWriteBuffer does nothing either: one packet is all it sends.
func (c *oneShotConn) SetWriteBuffer(int) error { return nil }
