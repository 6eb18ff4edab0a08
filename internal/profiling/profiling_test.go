package profiling

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

func TestListen(t *testing.T) {
	ln, err := Listen("")
	if ln != nil || err != nil {
		t.Errorf(`Listen(""): got %v, %v; want nil, nil (profiling off)`, ln, err)
	}
	if _, err := Listen("256.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "listen for profiling on 256.0.0.1:1") {
		t.Errorf("Listen of a bad address: got %v", err)
	}
}

func TestServeUntilCanceled(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.SetMutexProfileFraction(-1) // not 0 under go test -mutexprofile
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, ln, slog.New(slog.DiscardHandler))
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "profiling.test") {
		t.Errorf("/debug/pprof/cmdline: %d %q", resp.StatusCode, body)
	}
	if got := runtime.SetMutexProfileFraction(-1); got != mutexSampling {
		t.Errorf("mutex profile fraction while serving: %d, want %d", got, mutexSampling)
	}
	cancel()
	<-done // Serve returns once its context ends
	if got := runtime.SetMutexProfileFraction(-1); got != before {
		t.Errorf("mutex profile fraction after serving: %d, want %d (as before)", got, before)
	}
}
