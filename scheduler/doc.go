// Package scheduler decides where a binding runs: which member clusters it
// goes to and how many replicas each one gets. It is pure logic over the API
// types — no store, network, clock, goroutines or package state — so the
// hub's scheduling controller and the offline "flotilla plan" command give
// the same answer for the same input.
//
// [Schedule] works in three steps:
//
//  1. Filter. A cluster in Input.Evicted (the binding's graceful eviction
//     tasks) never fits, even when in the previous result: "is being
//     evicted from this binding". Otherwise a cluster fits when it matches
//     the placement's cluster
//     affinity (clusterNames, exclude, labelSelector, fieldSelector on
//     provider/region/zone) and every NoSchedule, NoExecute or PreferNoExecute taint on it is
//     tolerated by placement.clusterTolerations. Clusters already in the
//     binding's result skip the taint check: moving a workload off a tainted
//     cluster is eviction's job, not the scheduler's, and dropping it here
//     would bypass graceful eviction. Tolerations of Karmada's
//     cluster.karmada.io/* keys also tolerate the cluster.flotilla.io/* taint
//     with the same suffix, so Karmada policies work unchanged. Clusters
//     that reported the APIs they serve without the template's kind are no
//     candidates either. When nothing fits, Schedule returns an
//     [*UnschedulableError] worded like the Kubernetes scheduler's.
//
//     With clusterAffinities, steps 1–3 run with one group at a time, and
//     the first group that schedules (room and spread included) wins. The
//     groups are tried from the one the binding uses now
//     (Input.ObservedAffinity) to the last, then from the first: a binding
//     that fell back to a backup group stays there when the preferred group
//     recovers, until a Fresh schedule (rebalance, failback) starts again
//     from the first group. When every group fails, the error is the last
//     one tried.
//
//     A group with overflowAffinities (Karmada's overflow cluster
//     affinities) has tiers: its own affinity is the primary tier, each
//     overflow affinity one more, in order, and a cluster belongs to the
//     first tier that matches it. For a binding with replicas, a cluster
//     fits the group when it fits any tier; without replicas only the
//     primary tier counts. Overflow tiers need a division by room (dynamic
//     weights or Aggregated); with another division Schedule returns a
//     plain error, as validation rejects such a policy. The group fails,
//     and the next one is tried, only when no tier leaves a cluster or all
//     of them together lack room; its name is the one recorded, whichever
//     tiers the replicas went to.
//
//  2. Spread (only with placement.spreadConstraints). Each constraint
//     groups the clusters left by the one before (the first: those that
//     fit) by spreadByField (cluster name, spec.region, spec.zone,
//     spec.provider) or by the value of the spreadByLabel label; clusters
//     with an empty value are dropped. Fewer groups than minGroups (at
//     least 1) is an [*UnschedulableError] with Reason NoClusterFit: "spread
//     by region needs at least 2 groups, 1 available (eu)". Otherwise at
//     most maxGroups groups are kept (0: all), best first: highest score
//     (the sum of the clusters' scores), then, for a binding with replicas,
//     most room for the workload (the sum of [AvailableReplicas]), then
//     group name. A cluster scores 100 when the binding has replicas on it
//     (Input.Previous; locality) plus 10 when the affinity used lists it
//     in clusterNames, minus 1 for each PreferNoSchedule taint the
//     placement does not tolerate. A spread by cluster thus keeps at most maxGroups
//     clusters, placed ones first. The clusters of the groups kept go on to
//     division.
//
//  3. Divide. Duplicated gives every selected cluster all replicas. Divided
//     with static weights apportions them with the Webster (Sainte-Laguë)
//     method ([Webster]), which is deterministic and, unlike largest
//     remainder, never takes a replica away from a cluster when the total
//     grows. A binding without replicas gets every selected cluster with 0,
//     whatever the strategy; otherwise Divided results leave out clusters
//     with 0.
//
// Every Webster apportionment (static weights, dynamic weights,
// Aggregated) breaks an exact tie, two clusters with the same quotient, as
// Karmada does: to the cluster with fewer replicas so far, then by name,
// the lower first, or the higher first when the 32-bit FNV-1a hash of the
// template's UID (Input.TemplateUID: the binding's spec.resource.uid) is
// odd; without a UID, the lower. 5 replicas over two equal clusters thus
// go 3:2 for some workloads and 2:3 for others, as in Karmada for the same
// template, rather than always favouring the same cluster.
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
//     and the new replicas are apportioned by Webster over the rooms. When
//     they shrink, the new total is apportioned by Webster over the
//     previous replicas, so no cluster gains any; this needs no room.
//   - Fresh mode (Input.Fresh, for rebalancing and failback) starts over,
//     as if scheduling for the first time, with capacity = room + previous
//     replicas per cluster, and apportions by Webster over the capacities.
//
// Aggregated does the same over the fewest clusters, as Karmada does: it
// ranks the clusters by the weight of the step (room on a scale-up,
// previous replicas on a scale-down, capacity when Fresh), most first,
// takes the shortest prefix whose weights hold the replicas to place, and
// apportions among those alone. On a scale-up the clusters that have
// replicas come first, by room, so a cluster is added only when those
// lack room for the new replicas; a scale-down gives up the clusters with
// the fewest replicas. Equal weights rank as in Karmada's candidate
// order: clusters in the previous result first, then most capacity, then
// name (on a scale-down, name alone).
//
// With overflow tiers, dynamic weights and Aggregated divide tier by
// tier, as Karmada does: each tier, in order, gets as many of the replicas
// the tiers before it did not take as it holds (its capacity: room plus
// previous replicas of its selected clusters), divided among its clusters
// as without tiers, with the tier's part of the previous result as its
// previous result. Replicas thus overflow to a tier only when every
// earlier one is full; a scale-down empties the last tiers first; and a
// schedule after an earlier tier gained room moves replicas back to it
// (the hub schedules a fully placed Divided binding again only when its
// spec changes or a rebalance asks). A spread that keeps at most maxGroups
// groups ranks first those with a cluster of an earlier tier.
// [Result.Tiers] says how each tier was used.
//
// No cluster ever gets more than its room plus what it had: Webster over
// weights that total at least the seats gives no party more than its
// weight, and the apportionment is capped anyway.
// When the selected clusters' room (Steady: for the new replicas; Fresh:
// capacity) is too small, Schedule returns an [*UnschedulableError] with
// Reason Unschedulable: "0/3 clusters have room: need 10 replicas, 4
// available (member1: 3, member2: 1, member3: 0)"; the caller keeps the
// previous result. Static weights and Duplicated do not look at room.
//
// The result is sorted by cluster name and depends only on the input's
// content, not on the order of the clusters.
//
// A caller that schedules many bindings over the same clusters (the hub's
// scheduling controller) prepares them once with [NewFleet] and passes the
// Fleet in Input.Fleet: the clusters are sorted once, and each cluster's
// room per replica requirements, the clusters that do not serve a kind and
// each affinity's matches are computed once and shared, so a schedule is
// mostly the division itself. A Fleet only remembers: the results are the
// same as without one.
package scheduler
