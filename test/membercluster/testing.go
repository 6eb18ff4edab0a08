package membercluster

import (
	"log/slog"
	"testing"
)

// StartForTest starts member clusters in a temporary folder for the test and
// stops them when it ends, pass or fail. Progress goes to the test log.
func StartForTest(t testing.TB, specs ...ClusterSpec) *Environment {
	t.Helper()
	env, err := Start(t.Context(), Options{
		Dir:      t.TempDir(),
		Clusters: specs,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
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
