package membercluster

import (
	"log/slog"
	"testing"
)

// StartForTest starts member clusters in a temporary folder for the test and
// stops them when it ends, pass or fail. Progress goes to the test log.
func StartForTest(t testing.TB, specs ...ClusterSpec) *Environment {
	t.Helper()
	return StartOptionsForTest(t, Options{Clusters: specs})
}

// StartOptionsForTest is StartForTest with options; an empty Dir or Logger
// means a temporary folder and the test log.
func StartOptionsForTest(t testing.TB, opts Options) *Environment {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	env, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start member clusters: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop member clusters: %v", err)
		}
	})
	return env
}
