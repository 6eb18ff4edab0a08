package bootstraptoken

import (
	"fmt"
	"strings"
)

// Chart values a join sets; charts/flotilla-agent reads the same names.
const (
	ValueHubAddress = "hub.address"
	ValueCAPin      = "hub.caCertHash"
	ValueToken      = "bootstrapToken"
	ValueCluster    = "cluster.name"
	// AgentNamespace is where the join command installs the agent.
	AgentNamespace = "flotilla-system"
)

// clusterPlaceholder stands for the name when the token is not bound.
const clusterPlaceholder = "<CLUSTER-NAME>"

// JoinCommand is the helm command an operator runs against an edge
// cluster to join it with token: every value the agent needs, one per
// line.
func JoinCommand(info Info, t Token) string {
	cluster := t.Cluster
	if cluster == "" {
		cluster = clusterPlaceholder
	}
	lines := []string{
		"helm install flotilla-agent charts/flotilla-agent",
		"--namespace " + AgentNamespace + " --create-namespace",
		fmt.Sprintf("--set %s=%s", ValueCluster, cluster),
		fmt.Sprintf("--set %s=%s", ValueHubAddress, info.AgentAddress),
		fmt.Sprintf("--set %s=%s", ValueCAPin, info.CAPin),
		fmt.Sprintf("--set %s=%s", ValueToken, t),
	}
	return strings.Join(lines, " \\\n    ") + "\n"
}
