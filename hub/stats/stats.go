// Package stats is the shape of the hub's counters at GET /debug/stats, for
// operators, the load tools and the end-to-end tests (which read it without
// linking the hub itself).
package stats

import "github.com/flotilla-io/flotilla/hub/failover"

// Stats are the hub's counters, for the load tool and operators.
type Stats struct {
	Clusters        int   `json:"clusters"`
	ConnectedAgents int   `json:"connectedAgents"`
	Renewals        int64 `json:"renewals"`
	StatusReports   int64 `json:"statusReports"`
	// StoreWrites counts the registry's writes of clusters and leases to
	// the API server; StoreConflicts the writes it had to re-read for.
	StoreWrites    int64 `json:"storeWrites"`
	StoreConflicts int64 `json:"storeConflicts"`
	Transitions    int64 `json:"readyTransitions"`
	// UnknownTransitions are the Ready changes to Unknown among them.
	UnknownTransitions int64 `json:"unknownTransitions"`
	Events             int64 `json:"events"`
	RejectedAgentConn  int64 `json:"rejectedAgentConnections"`
	// UnstoredClusters and UnstoredLeases are changes held in memory, not
	// yet in the store: what a hub crash right now would lose.
	UnstoredClusters int `json:"unstoredClusters"`
	// UnstoredHealth are those among them whose Ready or taints changed.
	UnstoredHealth int `json:"unstoredHealth"`
	UnstoredLeases int `json:"unstoredLeases"`
	// WorksSent and WorkDeletesSent count Work upserts and deletions sent
	// to agents.
	WorksSent       int64 `json:"worksSent"`
	WorkDeletesSent int64 `json:"workDeletesSent"`
	// Failover: evictions made, eviction tasks ended and each zone's
	// partition protection mode (Normal, PartialDisruption,
	// FullDisruption, Isolated).
	Failover failover.Stats `json:"failover"`
}
