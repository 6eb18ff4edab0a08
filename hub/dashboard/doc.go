// Package dashboard serves the hub's web page of lease freshness at the root
// of its --http-addr: the fleet with each cluster's lease age against its
// duration and grace, a cluster page, and the workloads with their
// placement and graceful eviction tasks.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary. It
// signs in with a bearer token (kept in the browser's sessionStorage and
// sent in the Authorization header, never in a cookie), which the dashboard
// checks with a TokenReview against the hub's own API and authorizes with
// SubjectAccessReviews, cached per token for a short time. Actions (cordon,
// taint, rebalance, purge) are performed with the user's own token against
// the hub's API, so its RBAC and audit log apply.
//
// Data reaches the page over server-sent events: a snapshot, then deltas
// coalesced per connection and sent at most every FlushInterval, so a slow
// browser or a fleet of 10,000 clusters costs one pending entry per changed
// object, not a queue of changes. The page computes lease ages itself, every
// second, from the last renewal (kept in the hub's memory, not the Lease
// object, which the hub writes in batches) and the hub's clock offset.
package dashboard
