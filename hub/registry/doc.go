// Package registry is the hub's memory of its member clusters: each
// Cluster object, its lease and its health observations. Agent sessions
// (through the agent server, or relayed by other hub replicas) tell it of
// connections, renewals and status reports; it decides Ready and the health
// taints with package health at event-driven deadlines, records events
// (bounded per cluster and reason), and one writer goroutine stores what
// changed in batches. The dashboard, the metrics and the hub's HTTP
// endpoints read it through Lease, Counters, Snapshot and its Collector.
//
// Files: registry.go (state, loading, evaluation, deadlines), agents.go
// (what sessions report), writer.go (batched writes), watch.go (operators'
// edits through the informer), certs.go (agent certificate checks),
// events.go (event bounds), plausible.go (reports checked before they are
// believed), relay.go and handover.go (sessions of other replicas and of
// the leader before this one), leaseview.go (the dashboard's view),
// metrics.go (per-cluster series and the detection delay).
package registry
