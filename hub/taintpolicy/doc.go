// Package taintpolicy runs ClusterTaintPolicies (flotilla.io/v1alpha1 and
// Karmada's policy.karmada.io/v1alpha1 twin): taints added to a cluster
// when its status conditions match a policy's addOnConditions and removed
// when they match its removeOnConditions, with Karmada's rules (Apply,
// pure logic table-tested against Karmada's own cases).
//
// The controller reconciles a cluster when its conditions or labels change
// and every targeted cluster when a policy is created or its spec
// changes; deleting a policy leaves its taints. It writes a cluster only
// when its taints change: one Update over the informer's version, retried
// over the API server's latest on a conflict, so taints that others (the
// hub's health taints, operators) wrote meanwhile are kept. The same
// update records which policy added each taint in the annotation
// AnnotationTaintPolicies, which the dashboard and `flotilla describe
// cluster` show. Each taint added or removed is an event
// (TaintClusterSucceed, or TaintClusterFailed when the write fails) on the
// cluster and on the policy, and counts in a metric.
//
// The hub's own taints are not the policies': the terminating and
// unschedulable taints, the not-ready and unreachable NoSchedule taints,
// and, unless the hub runs with --health-no-execute-taints=false, their
// NoExecute taints too. A policy taint the hub owns is left alone, with a
// Warning event HubOwnedTaint on the policy.
package taintpolicy
