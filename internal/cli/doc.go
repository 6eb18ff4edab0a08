// Package cli implements flotilla, the operator's command-line client of the
// Flotilla hub.
//
// The hub serves its objects as Kubernetes-style JSON over HTTP (see
// docs/api.md): Clusters, policies, bindings and Works under
// /apis/flotilla.io/v1alpha1, the agents' Leases under
// /apis/coordination.k8s.io/v1 and Events under /api/v1. The commands here
// read those objects (get, describe), send resource templates and policies
// read from YAML or JSON files in one all-or-nothing request (apply,
// delete), and change what an operator owns on a Cluster (taint, cordon,
// uncordon) with a read-modify-write that retries on conflicts.
//
// Main is the whole entry point; cmd/flotilla only wires it to the process.
package cli
