package dispatch

import (
	"os"
	"testing"

	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// newCluster creates a Cluster with a name of the API server's choosing
// (cluster-scoped objects are shared by every test of the binary) and its
// execution namespace. At test end the Cluster goes (env.Cleanup) and so
// do the namespace and every Work in it, finalizers cleared: stop the
// dispatcher first (register its clean-up later).
func newCluster(t *testing.T, env *hubapi.Env) string {
	t.Helper()
	env.Cleanup(t)
	return controllertest.CreateClusterWithExecutionNamespace(t, env, "edge-")
}
