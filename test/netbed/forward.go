package netbed

import (
	"context"
	"errors"
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
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cancel()
		l.Close()
		return nil, errors.New("netbed: forward on a closed bed")
	}
	b.closers = append(b.closers, func() { cancel(); l.Close() })
	b.forwards.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.forwards.Done()
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
	}()
	return l.Addr(), nil
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
