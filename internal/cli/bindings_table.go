package cli

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bindingsTable decodes the hub's answer (a list, or one binding when
// single) into the "get bindings" table. A ClusterResourceBinding has the
// shape of a ResourceBinding, so both decode into one.
func bindingsTable(raw []byte, o tableOptions) (*table, error) {
	items, err := decodeItems[v1alpha1.ResourceBinding](raw, o.single, "ResourceBinding")
	if err != nil {
		return nil, err
	}
	t := o.newTable("NAMESPACE", "NAME", "RESOURCE", "REPLICAS", "SCHEDULED", "APPLIED", "CLUSTERS", "AGE")
	if o.wide {
		t.header = append(t.header, "EVICTIONS", "HEALTH")
	}
	for i := range items {
		t.add(bindingRow(&items[i], o)...)
	}
	return t, nil
}

func bindingRow(b *v1alpha1.ResourceBinding, o tableOptions) []string {
	row := o.row(b.Namespace,
		b.Name,
		b.Spec.Resource.Kind+"/"+b.Spec.Resource.Name,
		strconv.Itoa(int(b.Spec.Replicas)),
		scheduledText(b.Status.Conditions),
		conditionStatus(b.Status.Conditions, v1alpha1.BindingConditionFullyApplied),
		targetClustersText(b.Spec.Clusters),
		age(o.now, b.CreationTimestamp.Time),
	)
	if !o.wide {
		return row
	}
	return append(row, strconv.Itoa(len(b.Spec.GracefulEvictionTasks)), healthText(b.Status.AggregatedStatus))
}

// scheduledText is True when the binding is scheduled, else the reason it
// is not (Unschedulable, NoClusterFit), which says more than False.
func scheduledText(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, v1alpha1.BindingConditionScheduled)
	switch {
	case c == nil:
		return none
	case c.Status == metav1.ConditionTrue || c.Reason == "":
		return string(c.Status)
	}
	return c.Reason
}

// conditionStatus is the status of condition typ, or "-" without it.
func conditionStatus(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return none
	}
	return string(c.Status)
}

// targetClustersText lists the scheduling result as "member1:1,member2:2";
// a cluster without replicas (a ConfigMap, say) is named alone.
func targetClustersText(clusters []v1alpha1.TargetCluster) string {
	if len(clusters) == 0 {
		return noneList
	}
	parts := make([]string, len(clusters))
	for i, c := range clusters {
		parts[i] = c.Name
		if c.Replicas > 0 {
			parts[i] += ":" + strconv.Itoa(int(c.Replicas))
		}
	}
	return strings.Join(parts, ",")
}

// healthText lists the workload's health per cluster: "member1:Healthy".
func healthText(items []v1alpha1.AggregatedStatusItem) string {
	if len(items) == 0 {
		return noneList
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.ClusterName + ":" + cmp.Or(it.Health, v1alpha1.HealthUnknown)
	}
	return strings.Join(parts, ",")
}
