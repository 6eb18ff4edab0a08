package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// flotillaTaintPrefix is left out of the TAINTS column: the hub's own taints
// are the common case and the column is narrow.
const flotillaTaintPrefix = "cluster.flotilla.io/"

// clustersTable decodes the hub's answer (a ClusterList, or one Cluster when
// single) into the "get clusters" table.
func clustersTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[v1alpha1.Cluster](raw, o.single, v1alpha1.KindCluster)
	if err != nil {
		return nil, err
	}
	t := &table{header: []string{"NAME", "READY", "TAINTS", "VERSION", "NODES", "AGE"}}
	if o.wide {
		t.header = append(t.header, "PROVIDER", "REGION", "ZONE", "AGENT", "CONNECTED-TO", "SCHEDULING")
	}
	for i := range items {
		t.add(clusterRow(&items[i], o.wide, o.now)...)
	}
	return t, nil
}

func clusterRow(cl *v1alpha1.Cluster, wide bool, now time.Time) []string {
	row := []string{
		cl.Name,
		clusterReady(cl),
		shortTaints(cl.Spec.Taints),
		orNone(cl.Status.KubernetesVersion),
		nodeCount(cl.Status.NodeSummary),
		age(now, cl.CreationTimestamp.Time),
	}
	if !wide {
		return row
	}
	agentVersion, connectedTo := none, none
	if a := cl.Status.Agent; a != nil {
		agentVersion, connectedTo = orNone(a.Version), orNone(a.ConnectedTo)
	}
	return append(row, orNone(cl.Spec.Provider), orNone(cl.Spec.Region), orNone(cl.Spec.Zone),
		agentVersion, connectedTo, scheduling(cl))
}

// clusterReady is the status of the Ready condition: True, False, Unknown,
// or "-" when the hub has not set it yet.
func clusterReady(cl *v1alpha1.Cluster) string {
	c := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ClusterConditionReady)
	if c == nil {
		return none
	}
	return string(c.Status)
}

// shortTaints lists taints as key:Effect, without the cluster.flotilla.io/
// prefix.
func shortTaints(taints []corev1.Taint) string {
	if len(taints) == 0 {
		return noneList
	}
	parts := make([]string, len(taints))
	for i, t := range taints {
		parts[i] = strings.TrimPrefix(t.Key, flotillaTaintPrefix) + ":" + string(t.Effect)
	}
	return strings.Join(parts, ",")
}

// nodeCount is ready/total nodes.
func nodeCount(ns *v1alpha1.NodeSummary) string {
	if ns == nil {
		return none
	}
	return fmt.Sprintf("%d/%d", ns.ReadyNum, ns.TotalNum)
}

func scheduling(cl *v1alpha1.Cluster) string {
	if cl.Spec.Unschedulable {
		return "Unschedulable"
	}
	return "Schedulable"
}
