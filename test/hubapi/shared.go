package hubapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// shared is the API server of this test binary.
var shared sharedEnv

// sharedEnv starts one Env on first use and stops it when Main ends.
type sharedEnv struct {
	mu      sync.Mutex // held through start-up, so concurrent Starts wait for it
	running bool       // Main is running the tests
	env     *Env
	err     error // the start-up failure, reported to every later Start
}

// Main runs the tests of a package that uses Start, then stops the API
// server if a test started it, and returns the exit code (1 if the tests
// passed but the server would not stop). Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.running = true
	shared.mu.Unlock()
	code := m.Run()
	if err := shared.close(); err != nil {
		fmt.Fprintf(os.Stderr, "hubapi: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Start returns the test binary's API server, starting it on first use, and
// fails the test if it cannot (with "run `make testbin`" when the binaries
// are missing). Every test of the binary gets the same Env; TestMain must
// run the tests through Main, which stops it.
func Start(t testing.TB) *Env {
	t.Helper()
	env, took, err := shared.get()
	if err != nil {
		t.Fatalf("hubapi: %v", err)
	}
	if took > 0 {
		t.Logf("hubapi: API server %s ready with CRDs in %v; kubeconfig %s", env.Server, took.Round(time.Millisecond), env.Kubeconfig)
	}
	return env
}

// get returns the Env, and how long start-up took if this call started it.
func (s *sharedEnv) get() (*Env, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.running:
		return nil, 0, errors.New("hubapi.Start needs the package's TestMain to run the tests through hubapi.Main(m), which stops the API server after them")
	case s.env != nil:
		return s.env, 0, nil
	case s.err != nil:
		return nil, 0, fmt.Errorf("the API server failed to start earlier in this test binary: %w", s.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	began := time.Now()
	s.env, s.err = start(ctx, "")
	if s.err != nil {
		return nil, 0, s.err
	}
	return s.env, time.Since(began), nil
}

// close stops the Env, if one started; later Starts fail.
func (s *sharedEnv) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	if s.env == nil {
		return nil
	}
	env := s.env
	s.env = nil
	if err := env.stop(); err != nil {
		return fmt.Errorf("stop the API server: %w", err)
	}
	return nil
}
