package dashboard

import (
	"time"
)

// Lease is what the hub's registry knows in memory of a cluster's lease:
// the last renewal (hub clock), the duration the agent renews against, the
// recent renewals and the last status report.
type Lease struct {
	Cluster     string
	LastRenewal time.Time
	Duration    time.Duration
	// Renewals are the most recent renewals, oldest first.
	Renewals   []time.Time
	LastStatus time.Time
	// Connected is whether an agent session serves the cluster now.
	Connected bool
}

// LeaseSource is the registry's read-only view for the dashboard.
type LeaseSource interface {
	// Lease returns one cluster's lease, false if unknown.
	Lease(cluster string) (Lease, bool)
	// OnLeaseChange registers fn, called (cheaply, without blocking) with a
	// cluster's name whenever its lease, connection or status report
	// changes.
	OnLeaseChange(fn func(cluster string))
}

// ClusterView is one cluster as the page shows it. Times are Unix
// milliseconds of the hub's clock (0: never).
type ClusterView struct {
	Name          string      `json:"name"`
	Ready         string      `json:"ready"`
	ReadyReason   string      `json:"readyReason,omitempty"`
	ReadyMessage  string      `json:"readyMessage,omitempty"`
	ReadySince    int64       `json:"readySince,omitempty"`
	Conditions    []Condition `json:"conditions,omitempty"`
	Taints        []TaintView `json:"taints,omitempty"`
	Cordoned      bool        `json:"cordoned,omitempty"`
	Zone          string      `json:"zone,omitempty"`
	Region        string      `json:"region,omitempty"`
	Provider      string      `json:"provider,omitempty"`
	Kubernetes    string      `json:"kubernetes,omitempty"`
	Agent         string      `json:"agent,omitempty"`
	ConnectedTo   string      `json:"connectedTo,omitempty"`
	Transport     string      `json:"transport,omitempty"`
	Connected     bool        `json:"connected"`
	ClockSkew     string      `json:"clockSkew,omitempty"`
	Nodes         string      `json:"nodes,omitempty"`
	LastRenewal   int64       `json:"lastRenewal,omitempty"`
	LeaseDuration int64       `json:"leaseDurationMs,omitempty"`
	LastStatus    int64       `json:"lastStatus,omitempty"`
	Renewals      []int64     `json:"renewals,omitempty"`
	Registered    int64       `json:"registered,omitempty"`
	Terminating   bool        `json:"terminating,omitempty"`
}

// LeaseHistory is a cluster's recent renewals (Unix ms, oldest first),
// fetched by its page: kept out of the stream, where 10,000 clusters would
// carry them in every batch.
type LeaseHistory struct {
	Renewals []int64 `json:"renewals"`
}

// Condition is one status condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Since   int64  `json:"since,omitempty"`
}

// TaintView is one taint with when it was added, and by which
// ClusterTaintPolicy if one added it.
type TaintView struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
	Added  int64  `json:"added,omitempty"`
	Policy string `json:"policy,omitempty"`
}

// BindingView is one binding with its placement, per-cluster health and
// graceful eviction tasks.
type BindingView struct {
	Key       string          `json:"key"` // namespace/name, or name
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	Resource  string          `json:"resource"` // Kind/name
	Kind      string          `json:"kind"`
	APIVer    string          `json:"apiVersion"`
	ResName   string          `json:"resourceName"`
	Replicas  int32           `json:"replicas,omitempty"`
	Scheduled string          `json:"scheduled,omitempty"`
	Applied   string          `json:"applied,omitempty"`
	Placement []PlacementView `json:"placement,omitempty"`
	Tasks     []TaskView      `json:"tasks,omitempty"`
}

// PlacementView is one target cluster of a binding and the workload's
// health there.
type PlacementView struct {
	Cluster  string `json:"cluster"`
	Replicas int32  `json:"replicas,omitempty"`
	Applied  bool   `json:"applied"`
	Health   string `json:"health,omitempty"`
	// Message says why the Work is not applied there (e.g. refused by
	// the member cluster's policy); empty once applied.
	Message string `json:"message,omitempty"`
}

// TaskView is one graceful eviction task.
type TaskView struct {
	FromCluster string `json:"fromCluster"`
	Zone        string `json:"zone,omitempty"`
	Reason      string `json:"reason"`
	Producer    string `json:"producer,omitempty"`
	PurgeMode   string `json:"purgeMode,omitempty"`
	Created     int64  `json:"created,omitempty"`
	Waiting     string `json:"waiting,omitempty"`
}

// Settings are the hub's thresholds the page judges leases by.
type Settings struct {
	HubID                string `json:"hubID"`
	GracePeriod          int64  `json:"gracePeriodMs"`
	DefaultLeaseDuration int64  `json:"defaultLeaseDurationMs"`
	EvictionTimeout      int64  `json:"evictionTimeoutMs"`
}

// Snapshot is the first message of a stream: everything the user may see.
type Snapshot struct {
	Now      int64             `json:"now"`
	Settings Settings          `json:"settings"`
	Clusters []ClusterView     `json:"clusters"`
	Bindings []BindingView     `json:"bindings"`
	Zones    map[string]string `json:"zones"`
	// BindingsLimited is set when the user may not list every binding:
	// only those of the namespaces it may list are sent.
	BindingsLimited bool `json:"bindingsLimited,omitempty"`
}

// Delta is a batch of changes since the previous message: full views of
// what changed (latest wins) and the names of what went.
type Delta struct {
	Now             int64             `json:"now"`
	Clusters        []ClusterView     `json:"clusters,omitempty"`
	RemovedClusters []string          `json:"removedClusters,omitempty"`
	Bindings        []BindingView     `json:"bindings,omitempty"`
	RemovedBindings []string          `json:"removedBindings,omitempty"`
	Zones           map[string]string `json:"zones,omitempty"`
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
