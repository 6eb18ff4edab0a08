package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/eviction"
)

// writeBindingDescription prints a binding the way describe shows it.
func writeBindingDescription(w io.Writer, det *bindingDetails, now time.Time) error {
	d := &describeWriter{now: now}
	b := det.binding
	d.bindingOverview(b)
	d.placement(b.Spec.Placement, b.Status.SchedulerObservedAffinityName)
	d.conditions(b.Status.Conditions)
	d.bindingClusters(b)
	d.evictionTasks(b)
	d.preservedState(b)
	d.works(det.works)
	d.events(det.events)
	return d.flush(w)
}

func (d *describeWriter) bindingOverview(b *v1alpha1.ResourceBinding) {
	d.field(0, "Name:", b.Name)
	if b.Namespace != "" {
		d.field(0, "Namespace:", b.Namespace)
	}
	d.values("Labels:", labelPairs(b.Labels))
	d.field(0, "Created:", d.when(&b.CreationTimestamp))
	r := b.Spec.Resource
	ref := r.Name
	if r.Namespace != "" {
		ref = r.Namespace + "/" + r.Name
	}
	d.field(0, "Resource:", r.APIVersion+" "+r.Kind+" "+ref)
	d.field(0, "Replicas:", strconv.Itoa(int(b.Spec.Replicas)))
	d.field(0, "Last Scheduled:", d.when(b.Status.LastScheduledTime))
}

// placement sums up where the binding may run and how its replicas
// divide; inUse is the clusterAffinities group the scheduler used last.
func (d *describeWriter) placement(p *v1alpha1.Placement, inUse string) {
	if p == nil {
		d.field(0, "Placement:", noneList)
		return
	}
	d.heading("Placement:")
	if len(p.ClusterAffinities) > 0 {
		d.valuesAt(1, "Cluster Affinities:", affinityGroupTexts(p.ClusterAffinities, inUse))
	} else {
		d.field(1, "Cluster Affinity:", affinityText(p.ClusterAffinity))
	}
	tolerations := make([]string, len(p.ClusterTolerations))
	for i, t := range p.ClusterTolerations {
		tolerations[i] = tolerationText(t)
	}
	d.valuesAt(1, "Tolerations:", tolerations)
	spread := make([]string, len(p.SpreadConstraints))
	for i, s := range p.SpreadConstraints {
		spread[i] = spreadText(s)
	}
	d.valuesAt(1, "Spread Constraints:", spread)
	d.field(1, "Replica Scheduling:", schedulingText(p.ReplicaScheduling))
	d.valuesAt(1, "Weights:", weightTexts(p.ReplicaScheduling))
}

// bindingClusters tabulates every cluster the binding runs on (the
// scheduling result), is leaving (graceful eviction tasks) or still has
// status from.
func (d *describeWriter) bindingClusters(b *v1alpha1.ResourceBinding) {
	rows := clusterRows(b, d.now)
	if len(rows) == 0 {
		d.field(0, "Clusters:", noneList)
		return
	}
	d.heading("Clusters:")
	d.table(&table{header: []string{"CLUSTER", "REPLICAS", "APPLIED", "HEALTH", "STATUS"}, rows: rows})
}

// clusterRows are the rows of the Clusters table: the scheduling result in
// its order, then the clusters being evicted, then any other cluster that
// reported status.
func clusterRows(b *v1alpha1.ResourceBinding, now time.Time) [][]string {
	statuses := map[string]*v1alpha1.AggregatedStatusItem{}
	for i := range b.Status.AggregatedStatus {
		statuses[b.Status.AggregatedStatus[i].ClusterName] = &b.Status.AggregatedStatus[i]
	}
	seen := map[string]bool{}
	var rows [][]string
	for _, c := range b.Spec.Clusters {
		seen[c.Name] = true
		st := statuses[c.Name]
		replicas := strconv.Itoa(int(c.Replicas))
		if b.Spec.Replicas == 0 && c.Replicas == 0 {
			replicas = none // a kind without replicas, such as a ConfigMap
		}
		rows = append(rows, []string{c.Name, replicas, appliedText(st), healthOf(st), statusText(st)})
	}
	for _, t := range b.Spec.GracefulEvictionTasks {
		seen[t.FromCluster] = true
		st := statuses[t.FromCluster]
		rows = append(rows, []string{t.FromCluster, replicasOrNone(t.Replicas), appliedText(st), healthOf(st), evictingText(t, now)})
	}
	for _, st := range b.Status.AggregatedStatus {
		if !seen[st.ClusterName] {
			rows = append(rows, []string{st.ClusterName, none, appliedText(&st), healthOf(&st), statusText(&st)})
		}
	}
	return rows
}

// evictionTasks tabulates the graceful eviction tasks with their age and
// what each waits for, judged by the hub's own rules on the status shown.
func (d *describeWriter) evictionTasks(b *v1alpha1.ResourceBinding) {
	if len(b.Spec.GracefulEvictionTasks) == 0 {
		return
	}
	d.heading("Eviction Tasks:")
	rows := make([][]string, 0, len(b.Spec.GracefulEvictionTasks))
	for i := range b.Spec.GracefulEvictionTasks {
		t := &b.Spec.GracefulEvictionTasks[i]
		since := unknownAge
		if t.CreationTimestamp != nil {
			since = age(d.now, t.CreationTimestamp.Time)
		}
		v := eviction.Assess(t, b.Generation, &b.Spec, &b.Status, 0, d.now)
		waiting := v.Waiting
		if v.Done {
			waiting = "nothing: ending (" + v.Reason + ")"
		}
		rows = append(rows, []string{t.FromCluster, since, v1alpha1.NormalPurgeMode(t.PurgeMode), orNone(t.Reason), orNone(t.Producer), waiting})
	}
	d.table(&table{header: []string{"FROM", "AGE", "PURGE", "REASON", "BY", "WAITING FOR"}, rows: rows})
}

// preservedState tabulates the state eviction tasks preserved for the
// new copy (statePreservation), if any did: from which cluster, how old,
// the clusters before the failover and the labels.
func (d *describeWriter) preservedState(b *v1alpha1.ResourceBinding) {
	var rows [][]string
	for _, t := range b.Spec.GracefulEvictionTasks {
		if t.PreservedLabelState == nil {
			continue
		}
		observed := unknownAge
		if t.PreservedStateObservedAt != nil {
			observed = age(d.now, t.PreservedStateObservedAt.Time) + " ago"
		}
		labels := make([]string, 0, len(t.PreservedLabelState))
		for _, k := range slices.Sorted(maps.Keys(t.PreservedLabelState)) {
			labels = append(labels, k+"="+t.PreservedLabelState[k])
		}
		rows = append(rows, []string{t.FromCluster, observed, orNone(strings.Join(t.ClustersBeforeFailover, ",")), orNone(strings.Join(labels, ","))})
	}
	if len(rows) == 0 {
		return
	}
	d.heading("Preserved State:")
	d.table(&table{header: []string{"FROM", "OBSERVED", "BEFORE FAILOVER", "LABELS"}, rows: rows})
}

func replicasOrNone(r *int32) string {
	if r == nil {
		return none
	}
	return strconv.Itoa(int(*r))
}

// evictingText says why and since when the cluster is being left:
// "evicting (TaintUntolerated, 2m ago)".
func evictingText(t v1alpha1.GracefulEvictionTask, now time.Time) string {
	since := unknownAge
	if t.CreationTimestamp != nil {
		since = age(now, t.CreationTimestamp.Time) + " ago"
	}
	return fmt.Sprintf("evicting (%s, %s)", orNone(t.Reason), since)
}

// appliedText is whether the cluster's agent applied the workload, "-"
// before it reported.
func appliedText(st *v1alpha1.AggregatedStatusItem) string {
	switch {
	case st == nil:
		return none
	case st.Applied:
		return "True"
	}
	return "False"
}

func healthOf(st *v1alpha1.AggregatedStatusItem) string {
	if st == nil {
		return none
	}
	return orNone(st.Health)
}

// statusText is why applying failed, or else the status fields the agent
// reported as "key=value" pairs: "readyReplicas=2 replicas=2".
func statusText(st *v1alpha1.AggregatedStatusItem) string {
	switch {
	case st == nil:
		return none
	case !st.Applied && st.AppliedMessage != "":
		return oneLine(st.AppliedMessage)
	}
	return rawStatusText(st.Status)
}

func rawStatusText(raw *runtime.RawExtension) string {
	if raw == nil || len(raw.Raw) == 0 {
		return none
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw.Raw, &fields); err != nil {
		return oneLine(string(raw.Raw))
	}
	if len(fields) == 0 {
		return none
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		var v bytes.Buffer
		if err := json.Compact(&v, fields[k]); err != nil {
			v.Write(fields[k])
		}
		pairs[i] = k + "=" + strings.Trim(v.String(), `"`)
	}
	return oneLine(strings.Join(pairs, " "))
}

// works tabulates the binding's Works: which generation each cluster's
// agent acknowledged and applied, and which wait for deletion.
func (d *describeWriter) works(works []v1alpha1.Work) {
	if len(works) == 0 {
		d.field(0, "Works:", noneList)
		return
	}
	d.heading("Works:")
	t := &table{header: []string{"CLUSTER", "NAME", "GENERATION", "ACKED", "APPLIED", "DELETING"}}
	for i := range works {
		w := &works[i]
		t.add(workCluster(w), w.Name, strconv.FormatInt(w.Generation, 10), acked(w),
			conditionStatus(w.Status.Conditions, v1alpha1.WorkConditionApplied), deleting(w))
	}
	d.table(t)
}

// affinityGroupTexts is a line per clusterAffinities group, marking the
// one in use, and one per overflow tier below its group, in order.
func affinityGroupTexts(groups []v1alpha1.ClusterAffinityTerm, inUse string) []string {
	var lines []string
	for i := range groups {
		g := &groups[i]
		name := g.AffinityName
		if name == inUse {
			name += " (in use)"
		}
		lines = append(lines, name+": "+affinityText(&g.ClusterAffinity))
		for j := range g.OverflowAffinities {
			o := &g.OverflowAffinities[j]
			lines = append(lines, "  overflow tier "+o.AffinityName+": "+affinityText(&o.ClusterAffinity))
		}
	}
	return lines
}
