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
//     grows. A binding without replicas gets every selected cluster with 0,
//     whatever the strategy; otherwise Divided results leave out clusters
//     with 0.
//
// Divided with dynamic weights (weightPreference.dynamicWeight:
// AvailableReplicas) and Divided/Aggregated divide by room. A cluster's
// room is [AvailableReplicas] for Input.Requirements: what its resource
// summary has left, divided by what one replica requests. "Previous" below
// is Input.Previous restricted to the selected clusters, and "kept" its
// total.
//
//   - Steady mode (the default) changes the previous result as little as it
//     can. When kept equals the replicas, it is the result, whatever the
//     room now. When the replicas grow (a cluster that left the selection
//     counts as a shrunk previous result), every cluster keeps what it has
//     and the new replicas are placed by room: by Webster over the rooms
//     for dynamic weights; for Aggregated, the clusters already used are
//     filled first, most room first, then as few new ones as fit, most room
//     first, ties by name. When the replicas shrink, the new total is
//     apportioned by Webster over the previous replicas, so no cluster
//     gains any; this needs no room, for either strategy.
//   - Fresh mode (Input.Fresh, for rebalancing and failback) starts over,
//     with capacity = room + previous replicas per cluster. Dynamic weights
//     apportion by Webster over the capacities. Aggregated takes the fewest
//     clusters whose capacities hold the replicas; among the ways to do
//     that, the one with the most already-used clusters, then the most
//     capacity, then names; and apportions over their capacities.
//
// No cluster ever gets more than its room plus what it had: every
// apportionment is capped, a capped cluster's excess re-apportioned among
// the others (with weights equal to the caps, Webster never needs it).
// When the selected clusters' room (Steady: for the new replicas; Fresh:
// capacity) is too small, Schedule returns an [*UnschedulableError] with
// Reason Unschedulable: "0/3 clusters have room: need 10 replicas, 4
// available (member1: 3, member2: 1, member3: 0)"; the caller keeps the
// previous result. Static weights and Duplicated do not look at room.
//
// The result is sorted by cluster name and depends only on the input's
// content, not on the order of the clusters.
//
// Not done yet: spreadConstraints (ignored for now), scoring, and the
// eviction and API-availability filters.
package scheduler
