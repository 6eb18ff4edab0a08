// Package replicas is what hub replicas tell each other, so that any of
// them can serve agents and the next leader judges each cluster as the last
// one would have:
//
//   - Relay sits between a replica's agent server and the registry that
//     decides health. While the replica leads, calls go straight to its own
//     registry; while it stands by, the relay stamps renewals itself and
//     sends what changed in its sessions to the leader in batches.
//   - Gossip is a replica's part in the memberlist group: it carries the
//     relayed batches (and session ends, resync requests) to the leader,
//     and the leader's session table to the standbys every interval, so
//     that the next leader takes over with it (TakeOver, WithRenewing).
//
// The wire formats are packages relay and handover; the group itself is
// package gossip.
package replicas
