// Package admission holds the admission plugins the hub compiles into its
// API server. They run in-process, after the built-in plugins, on every
// request, whoever sends it (kubectl, the flotilla CLI, the hub itself):
//
//   - FlotillaValidation refuses policies, rebalancers and Clusters that
//     api/validation refuses, with the path of every offending field;
//   - FlotillaTaintTime stamps timeAdded on the taints of a Cluster;
//   - FlotillaProtection keeps the CRDs of Flotilla's API groups and the
//     namespace of the cluster leases from anyone but system:masters,
//     bootstrap tokens from anyone who may not manage them (flotilla-admin),
//     and the creation of agent certificate requests and the Clusters'
//     agent certificate serials from anyone but the hub itself.
//
// Plugins returns them for apiserver.Config.Admission.
package admission
