// Package agent is the Flotilla member-cluster agent. It dials the hub over
// QUIC (the hub never needs inbound access to a member cluster), renews the
// cluster's lease on the control stream, reports the cluster's health and
// capacity on a separate status stream, so heartbeats never queue behind
// status, and applies the hub's Works on a work stream.
//
// An agent without a certificate but with a bootstrap token joins first
// (join.go): it makes its key, sends the token and a certificate request on
// a join connection that trusts the hub by its CA pin alone, retries while
// the request waits for approval, and stores the certificate the hub signs
// before its first session. Its credentials live in a credential store
// (package credstore): a directory, or a Secret of the member cluster.
//
// [Run] is a whole agent process: its HTTP endpoints (/healthz, /readyz,
// /metrics) and the agent, which with leader election (leader.go) runs
// only while this replica leads a Lease of the member cluster.
//
// One [Agent] runs one session per connection: dial, Hello, wait for
// Welcome, then renew, report and take Works until the connection ends. It
// then reconnects with jittered exponential backoff until its context ends,
// when it tells the hub with GoAway and closes the connection.
//
// The Work engine (package work) belongs to the Agent, not to a session:
// applies, retries and watches go on while the hub is unreachable, and each
// new session starts with the engine's inventory and a status snapshot.
// Each acknowledged renewal tells the engine that the hub was there, which
// is what fencing counts from; a session in which the engine fences a Work
// ends, so that the next inventory tells the hub, which restores it.
//
// Packages of their own hold what the agent uses through a narrow API:
//
//   - [github.com/flotilla-io/flotilla/agent/work]: the Work engine, which
//     applies and deletes Works' objects, watches their health and fences.
//   - [github.com/flotilla-io/flotilla/agent/credstore]: the credential
//     store, a directory or a Secret, with the item names (ca.crt,
//     tls.crt, tls.key, and a renewal's tls.key.next and tls.crt.next).
//   - [github.com/flotilla-io/flotilla/agent/clusterstatus]: what the
//     status stream reports about the member cluster: the API server's
//     health probe, its version and served APIs, and the node and pod
//     capacity sums, kept by watches that run for the whole of Run.
//   - [github.com/flotilla-io/flotilla/agent/ownerref]: the owner
//     (--owner-service-account) of what the agent makes in its namespace
//     for itself, so that removing the installation removes it too.
//
// This package keeps the session (dial, Hello, the control, status and work
// streams), join and rotation, leader election, the configuration and Run.
package agent
