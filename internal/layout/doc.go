// Package layout has no code: its test holds Flotilla's import rules, as
// `go list` sees the packages.
//
//   - The flotilla CLI (internal/cli and its two mains) depends on no
//     package of the hub (hub and hub/...): what both need lives in small
//     packages of its own, such as internal/kube and
//     internal/bootstraptoken.
//   - No controller of the hub depends on another: what controllers share
//     lives in packages that are not controllers, such as hub/controller,
//     hub/names and hub/aggregate.
package layout
