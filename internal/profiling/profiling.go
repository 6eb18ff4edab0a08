// Package profiling serves Go's profiling endpoints (net/http/pprof) on a
// listener of their own, for the hub and the agent: never on their public
// HTTP address, since profiles show what a process holds and cost CPU.
package profiling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// mutexSampling is the fraction of mutex contention events sampled while
// the endpoints serve (1 in 100 on average): without it
// /debug/pprof/mutex is empty. Only contended locks pay for it.
const mutexSampling = 100

// Serve serves net/http/pprof's endpoints on ln until ctx ends and the
// server has shut down.
func Serve(ctx context.Context, ln net.Listener, logger *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	// A setting of the whole process: one profiling server runs per
	// process (the hub's or the agent's), and the setting is put back
	// when it stops.
	previous := runtime.SetMutexProfileFraction(mutexSampling)
	defer runtime.SetMutexProfileFraction(previous)
	logger.Info("profiling endpoints enabled", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("profiling server stopped", "err", err)
	}
	<-shutDown // a profile being written ends (or is cut) before Serve returns
}

// Listen opens the profiling address; empty: profiling is off (nil).
func Listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for profiling on %s: %w", addr, err)
	}
	return ln, nil
}
