// Package controllertest holds the fixtures the hub controllers' tests
// share: the test binary's API server (test/hubapi) with a namespace per
// test, a controller run on informers of its own until the test ends,
// events kept in memory, counters of conflicts and of retries through the
// queue, clusters, bindings of either scope, waits on bindings, on events
// and on the wake-ups a controller asks for, a busy writer of bindings'
// status, and clusters with their execution namespaces.
//
// Only tests import it: it runs kube-apiserver through test/hubapi, so a
// package that uses it runs its tests through hubapi.Main, and every test
// of the binary shares that one API server:
//
//	func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }
package controllertest
