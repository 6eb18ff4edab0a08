// Package hubapi gives tests a real Kubernetes API server with Flotilla's
// CRDs installed, as the hub serves its objects, without linking
// kube-apiserver into the test binary as importing hub/apiserver would:
// etcd and kube-apiserver from `make testbin` run as child processes
// (test/membercluster with APIServerOnly) that die with the test binary.
//
// A test binary has one server, started by the first Start and shared by
// all its tests; Main stops it after them:
//
//	func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }
//
//	func TestBinding(t *testing.T) {
//		env := hubapi.Start(t)
//		ns := env.Namespace(t) // deleted with its contents at test end
//		env.Cleanup(t)         // cluster-scoped Flotilla objects deleted at test end
//		works := env.Flotilla.FlotillaV1alpha1().Works(ns)
//		...
//	}
//
// The server is kube-apiserver v1.37.2 on its own etcd, TLS on a free
// loopback port, client-certificate authentication (no anonymous requests)
// and RBAC, with the hub's admission settings (ServiceAccount,
// StorageObjectInUseProtection and DefaultTolerationSeconds off, so Pod
// templates are stored as written). Env's clients act as admin
// (system:masters) with client-side limits of QPS 500 and Burst 1000;
// AsUser impersonates anyone else, for RBAC tests.
//
// Start-up, from the first Start to a server serving every CRD, takes
// 2.6-3.0 s on the 2-core development machine (BenchmarkStart, 10 runs:
// 2.9 s/op with other builds running, 2.6 s idle; etcd 0.1 s,
// kube-apiserver 2.0-2.4 s, CRDs 0.4 s); stopping takes 0.1 s. Start
// leaves nothing for the first test to wait for: the API server holds every
// create of a custom resource for 2 s after its CRD became Established and
// answers lists of each with 429, retry after 1 s, until its watch cache is
// ready; Start backdates the condition and polls the lists.
//
// Limits. Only the API server runs, no other part of a control plane:
//
//   - No garbage collector: ownerReferences do not cascade.
//   - No namespace controller: a deleted namespace stays Terminating with
//     everything in it. Namespace does that controller's work at test end
//     (every object deleted, finalizers cleared, the namespace finalized).
//   - An object with finalizers stays, with a deletionTimestamp, until they
//     are removed. At test end Namespace and Cleanup clear them without
//     running any controller's finalization, so stop controllers first
//     (t.Context() is canceled before clean-ups run).
//   - No service-account or token controllers (namespaces get no "default"
//     ServiceAccount or kube-root-ca.crt ConfigMap), no scheduler and no
//     nodes: Pods stay Pending.
//   - A namespace isolates only code that looks in that namespace: an
//     informer over all namespaces sees the objects of tests running in
//     parallel.
//   - Cluster-scoped objects are shared by all tests of the binary, and
//     Cleanup deletes every object of Flotilla's cluster-scoped kinds
//     (Cluster, ClusterPropagationPolicy, ClusterResourceBinding,
//     PurgeRequest, WorkloadRebalancer), whichever test made it: tests that
//     create them must not run in parallel with each other.
//     Other cluster-scoped objects a test makes are its own to delete.
//   - Only the CRDs are installed, not the hub's ClusterRoles
//     (flotilla-viewer, -operator, -admin) or its in-process admission.
//   - A consistent list of a custom resource that has not changed while
//     others did may wait up to ~100 ms for the watch cache to catch up
//     with etcd, as on any API server.
//   - The server's files (kubeconfig, certificates, etcd data, logs) are in
//     Env.Dir, removed by Main. A killed test binary takes etcd and
//     kube-apiserver with it but leaves Dir in $TMPDIR.
package hubapi
