package netbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forward listens on listenAddr (TCP) inside from and relays each
// connection to dialAddr inside to; a nil namespace is the host's own. It
// runs until the bed is closed. It returns the address it listens on
// (listenAddr may ask for port 0). The test uses it where a faithful setup
// would have a local service: an edge site's member API server at the
// address in its kubeconfig, the hub's API and HTTP for the test itself.
func (b *Bed) Forward(from *Namespace, listenAddr string, to *Namespace, dialAddr string) (net.Addr, error) {
	l, err := from.Listen(listenAddr)
	if err != nil {
		return nil, fmt.Errorf("netbed: forward %s: %w", listenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = b.serve("forward", func() { cancel(); l.Close() }, func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed with the bed
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				relay(ctx, c, to, dialAddr)
			}()
		}
	})
	if err != nil {
		return nil, err
	}
	return l.Addr(), nil
}

// serve runs run in a goroutine that the bed's Close stops with stop and
// waits for. On a closed bed it calls stop at once and returns an error
// naming what.
func (b *Bed) serve(what string, stop, run func()) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		stop()
		return fmt.Errorf("netbed: %s on a closed bed", what)
	}
	b.closers = append(b.closers, stop)
	b.forwards.Add(1)
	go func() {
		defer b.forwards.Done()
		run()
	}()
	return nil
}

// relay copies between c and a new connection to dialAddr inside to until
// either side ends or ctx is cancelled.
func relay(ctx context.Context, c net.Conn, to *Namespace, dialAddr string) {
	defer c.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	d, err := to.Dial(dctx, "tcp", dialAddr)
	cancel()
	if err != nil {
		return // the client sees its connection closed, as with a refused port
	}
	defer d.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); d.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(d, c)
	go pipe(c, d)
	<-done
	<-done
}
