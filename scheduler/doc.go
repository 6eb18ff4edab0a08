// Package scheduler decides where a binding runs: which member clusters it
// goes to and how many replicas each one gets. It is pure logic over the API
// types — no store, network, clock, goroutines or package state — so the
// hub's scheduling controller and the offline "flotilla plan" command give
// the same answer for the same input.
//
// [Schedule] works in two steps:
//
//  1. Filter. A cluster fits when it matches the placement's cluster
//     affinity (clusterNames, exclude, labelSelector, fieldSelector on
//     provider/region/zone) and every NoSchedule or NoExecute taint on it is
//     tolerated by placement.clusterTolerations. Clusters already in the
//     binding's result skip the taint check: moving a workload off a tainted
//     cluster is eviction's job, not the scheduler's, and dropping it here
//     would bypass graceful eviction. Tolerations of Karmada's
//     cluster.karmada.io/* keys also tolerate the cluster.flotilla.io/* taint
//     with the same suffix, so Karmada policies work unchanged. With
//     clusterAffinities, the groups are tried in order and the first that
//     leaves a cluster wins. When nothing fits, Schedule returns an
//     [*UnschedulableError] worded like the Kubernetes scheduler's.
//
//  2. Divide. Duplicated gives every selected cluster all replicas. Divided
//     with static weights apportions them with the Webster (Sainte-Laguë)
//     method ([Webster]), which is deterministic and, unlike largest
//     remainder, never takes a replica away from a cluster when the total
//     grows.
//
// The result is sorted by cluster name and depends only on the input's
// content, not on the order of the clusters.
//
// Not in this first cut, coming next: spreadConstraints (ignored for now),
// dynamic weights (AvailableReplicas) and Aggregated division (both return
// an error), scoring, and the eviction and API-availability filters.
package scheduler
