// Package agent is the Flotilla member-cluster agent. It dials the hub over
// QUIC (the hub never needs inbound access to a member cluster), renews the
// cluster's lease on the control stream, and reports the cluster's health and
// capacity on a separate status stream, so heartbeats never queue behind
// status.
//
// One [Agent] runs one session per connection: dial, Hello, wait for
// Welcome, then renew and report until the connection ends. It then
// reconnects with jittered exponential backoff until its context ends, when
// it tells the hub with GoAway and closes the connection.
package agent
