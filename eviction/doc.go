// Package eviction is the decision logic of the failover pipeline: when a
// binding must leave a cluster, what the graceful eviction task says, when
// that task ends, and how fast a zone may lose its workloads. It is pure
// logic over the API types — no store, network, clock, goroutines or
// package state; times are passed in — so the hub's controllers can be
// tested, and their decisions replayed, without waiting for anything.
//
// Taints ([Decide]). Only NoExecute taints evict. A taint that no toleration
// of the binding tolerates evicts at once. A tolerated taint evicts once
// its allowance has run: the tolerationSeconds of the first toleration
// that matches it, as in Kubernetes and Karmada (<= 0 is 0), or never if
// that one sets no seconds; tolerations after it do not count. Unlike Kubernetes,
// which starts every allowance when the pod is first seen tainted, each
// taint's allowance starts at its own timeAdded (as in Karmada), and never
// before the time the hub last left isolation, so that a hub that was cut
// off does not evict everything the moment it can see again. Tolerations
// of cluster.karmada.io/* keys tolerate the cluster.flotilla.io/* taint
// with the same suffix ([scheduler.Tolerates]).
//
// Default tolerations ([WithDefaultTolerations]). A policy that does not
// tolerate the not-ready or unreachable NoExecute taint gets a toleration
// of it for a fixed time (300 s by default), like the DefaultTolerationSeconds
// admission plugin of Kubernetes. A policy's own toleration wins, forever
// included.
//
// Eviction ([Evict]). The cluster leaves spec.clusters, so the scheduler
// sees replicas missing and places them elsewhere, and a graceful eviction
// task keeps the old copy running meanwhile. There is at most one task per
// cluster: a repeated eviction keeps the first task's creation time.
// purgeMode Never sets suppressDeletion.
//
// Preserved state ([StateFor], [InjectedLabels]). With statePreservation
// rules, an eviction takes each rule's value from the workload's status in
// the cluster it leaves: the value the agent read for the rule's JSONPath
// on the live object, else the JSONPath evaluated on the key status fields
// it reported. The task records the values, all or none;
// each must be a valid label value (refused, never truncated: the status
// comes from an agent). The copy in the new cluster gets them as labels
// under Karmada's restrictions: one target cluster, the last task,
// purgeMode Directly, a cluster that did not run the workload before.
// With Directly the old copy goes before any new one is made
// ([DirectlyPurged], [ExistingClusters]).
//
// Task end ([Assess]). A task with suppressDeletion never ends by itself. A
// task never ends before the scheduler has placed the binding anew (its
// observed generation and a True Scheduled condition for the current
// generation, with at least one cluster): there is no purge without a
// replacement, whatever the grace period. Once replaced, the task ends
// when every cluster of the new result reports the workload applied and
// Healthy, or when its grace period (its own gracePeriodSeconds, else the
// hub's default) has run from its creation; a task without a creation time
// has not started its grace period (the hub stamps one, as Karmada does).
//
// Times are instants. The API stores them to the second, rounded down, so
// a caller that read them from there rounds them up (or knows them better)
// before asking: nothing may be evicted, nor a task ended, before its
// toleration or grace period has run.
//
// Partition protection ([Zones]). Evictions are rate limited the way
// Kubernetes' node lifecycle controller limits node evictions: by failed
// clusters per zone over time, not by bindings. A cluster asks for
// admission to eviction when the first of its bindings is due to leave it
// ([Zones.Admit]); each zone admits its clusters one at a time, earliest
// failure first, from a token bucket of burst 1 (0.1 clusters/s by
// default: one failed cluster at once, the next 10 s later). Once a
// cluster is admitted, every binding on it may be evicted as fast as the
// API allows (an optional ceiling in bindings per second per zone,
// Karmada's --resource-eviction-rate, can slow that down); it stays
// admitted until it no longer carries a NoExecute taint ([Zones.Forget]),
// and a cluster that fails again queues again. A rate of 0 halts
// evictions in the modes that use it, as in Kubernetes, admitted clusters
// included. The rules of the modes are the node lifecycle controller's,
// with clusters for nodes. A zone whose clusters are all not Ready is in
// FullDisruption and keeps the normal rate: the zone is most likely really
// down. A zone with more than 2 and at least 55 % of its clusters not
// Ready is in PartialDisruption: that looks like a network problem more
// than failed clusters, so its rate drops to 0.01 clusters/s, or to 0 for
// zones of at most 50 clusters. When every zone is in FullDisruption the
// hub assumes that it is the one cut off: every zone is Isolated and
// nothing is evicted, from admitted clusters neither, until a cluster is
// Ready again; then the grace of every taint restarts ([Zones.GraceStart])
// and every admission is taken back, so the clusters still down queue
// again. Admissions are the hub's to record ([Zones.TakeChanges]) and to
// give back after a restart ([Zones.Restore]).
package eviction
