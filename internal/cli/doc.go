// Package cli implements flotilla, the operator's command-line client of the
// Flotilla hub.
//
// The hub's API is a Kubernetes API server (the kube-apiserver it embeds),
// and flotilla is one of its clients, as kubectl is: it reaches it with a
// kubeconfig loaded as kubectl loads one (--kubeconfig, else $KUBECONFIG,
// else ~/.kube/config; --context, else the current context; the context's
// namespace for namespaced objects without -n), through client-go's typed
// clients of Flotilla's kinds (api/client), the Kubernetes clientset, and
// the dynamic client with a RESTMapper from discovery for templates of any
// kind. Every command is an ordinary API request that the hub
// authenticates, authorizes with RBAC and audits:
//
//   - get and describe read Clusters, coordination.k8s.io Leases,
//     (Cluster)PropagationPolicies, (Cluster)ResourceBindings, Works,
//     WorkloadRebalancers and core/v1 Events, and the templates the
//     bindings name; -o json|yaml prints what the hub sent.
//   - apply checks every document of its files here, has the hub check
//     every object with a server-side dry run, and only then applies them
//     one by one with server-side apply (field manager "flotilla", without
//     forcing conflicts); Karmada's documents become Flotilla's first.
//     delete deletes the objects the files name.
//   - taint, cordon and uncordon Update a Cluster's spec on the version
//     they read, re-reading and re-applying the change on a conflict.
//   - purge creates a PurgeRequest, rebalance a WorkloadRebalancer, and
//     both wait for the hub's controllers to write the result into its
//     status.
//   - plan runs the hub's scheduler offline, on files; version prints the
//     client's version and the hub's /version.
//
// Main is the whole entry point; cmd/flotilla and cmd/kubectl-flotilla (the
// same program as a kubectl plugin: "kubectl flotilla get clusters") only
// wire it to the process.
package cli
