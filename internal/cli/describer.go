package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describeKeyWidth is where describe's values start, so that every
// "Key:  value" line of the description lines up.
const describeKeyWidth = 22

// tableIndent indents the tables inside a description.
const tableIndent = "  "

// describeWriter collects a description: "Key: value" fields, headings and
// indented tables.
type describeWriter struct {
	buf bytes.Buffer
	now time.Time
	err error // first error of a table
}

// field writes key and value, the value at describeKeyWidth; level indents
// the key by two spaces per level.
func (d *describeWriter) field(level int, key, value string) {
	key = strings.Repeat("  ", level) + key
	pad := max(describeKeyWidth-len(key), 1)
	fmt.Fprintf(&d.buf, "%s%s%s\n", key, strings.Repeat(" ", pad), value)
}

// values writes a key with one value per line, or <none>.
func (d *describeWriter) values(key string, values []string) { d.valuesAt(0, key, values) }

// valuesAt writes values like values, the key indented by level.
func (d *describeWriter) valuesAt(level int, key string, values []string) {
	if len(values) == 0 {
		d.field(level, key, noneList)
		return
	}
	for i, v := range values {
		if i > 0 {
			key = ""
		}
		d.field(level, key, v)
	}
}

func (d *describeWriter) heading(key string) { fmt.Fprintf(&d.buf, "%s\n", key) }

func (d *describeWriter) table(t *table) {
	if err := t.writeIndented(&d.buf, tableIndent); err != nil && d.err == nil {
		d.err = err
	}
}

// writeClusterDescription prints a cluster the way describe shows it.
func writeClusterDescription(w io.Writer, det *clusterDetails, now time.Time) error {
	d := &describeWriter{now: now}
	cl := det.cluster
	d.overview(cl)
	d.taints(cl.Spec.Taints, taintOwners(cl.Annotations[v1alpha1.AnnotationTaintPolicies]))
	d.conditions(cl.Status.Conditions)
	d.field(0, "Kubernetes Version:", orNone(cl.Status.KubernetesVersion))
	d.field(0, "Nodes:", nodesReady(cl.Status.NodeSummary))
	d.resources(cl.Status.ResourceSummary)
	d.agent(cl.Status.Agent)
	d.lease(det.lease)
	d.events(det.events)
	return d.flush(w)
}

// flush writes the description to w, unless a table failed.
func (d *describeWriter) flush(w io.Writer) error {
	if d.err != nil {
		return d.err
	}
	if _, err := w.Write(d.buf.Bytes()); err != nil {
		return fmt.Errorf("writing description: %w", err)
	}
	return nil
}

func (d *describeWriter) overview(cl *v1alpha1.Cluster) {
	d.field(0, "Name:", cl.Name)
	d.values("Labels:", labelPairs(cl.Labels))
	d.field(0, "Provider:", orNone(cl.Spec.Provider))
	d.field(0, "Region:", orNone(cl.Spec.Region))
	d.field(0, "Zone:", orNone(cl.Spec.Zone))
	d.field(0, "Created:", d.when(&cl.CreationTimestamp))
	d.field(0, "Unschedulable:", strconv.FormatBool(cl.Spec.Unschedulable))
}

func labelPairs(labels map[string]string) []string {
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return pairs
}

// taints lists key=value:Effect, how long ago each was added and by which
// ClusterTaintPolicy (owners, by key:Effect).
func (d *describeWriter) taints(taints []corev1.Taint, owners map[string]string) {
	width := 0
	for _, t := range taints {
		width = max(width, len(taintString(t)))
	}
	lines := make([]string, len(taints))
	for i, t := range taints {
		lines[i] = taintString(t)
		if t.TimeAdded != nil {
			lines[i] = fmt.Sprintf("%-*s   added %s ago", width, lines[i], age(d.now, t.TimeAdded.Time))
		}
		if p := owners[t.Key+":"+string(t.Effect)]; p != "" {
			lines[i] += " by ClusterTaintPolicy " + p
		}
	}
	d.values("Taints:", lines)
}

// taintOwners reads the Cluster's annotation of which ClusterTaintPolicy
// added which taint; anything but a JSON object of strings reads as none.
func taintOwners(annotation string) map[string]string {
	owners := map[string]string{}
	if annotation != "" && json.Unmarshal([]byte(annotation), &owners) != nil {
		return map[string]string{}
	}
	return owners
}

// taintString is key=value:Effect, or key:Effect without a value.
func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func (d *describeWriter) conditions(conds []metav1.Condition) {
	if len(conds) == 0 {
		d.field(0, "Conditions:", noneList)
		return
	}
	d.heading("Conditions:")
	t := &table{header: []string{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}}
	for _, c := range conds {
		t.add(c.Type, string(c.Status), orNone(c.Reason), age(d.now, c.LastTransitionTime.Time), oneLine(c.Message))
	}
	d.table(t)
}

func nodesReady(ns *v1alpha1.NodeSummary) string {
	if ns == nil {
		return none
	}
	return fmt.Sprintf("%d/%d ready", ns.ReadyNum, ns.TotalNum)
}

// resources tabulates allocatable and allocated per resource name, with
// the share allocated.
func (d *describeWriter) resources(rs *v1alpha1.ResourceSummary) {
	if rs == nil || len(rs.Allocatable)+len(rs.Allocated) == 0 {
		d.field(0, "Resources:", noneList)
		return
	}
	d.heading("Resources:")
	t := &table{header: []string{"RESOURCE", "ALLOCATABLE", "ALLOCATED"}}
	for _, name := range resourceNames(rs) {
		allocatable, hasAllocatable := rs.Allocatable[name]
		allocated, hasAllocated := rs.Allocated[name]
		cells := []string{string(name), none, none}
		if hasAllocatable {
			cells[1] = allocatable.String()
		}
		if hasAllocated {
			cells[2] = allocated.String() + share(allocated, allocatable)
		}
		t.add(cells...)
	}
	d.table(t)
}

// resourceNames is the sorted union of the summary's resource names.
func resourceNames(rs *v1alpha1.ResourceSummary) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	for n := range rs.Allocatable {
		seen[n] = true
	}
	for n := range rs.Allocated {
		seen[n] = true
	}
	names := make([]corev1.ResourceName, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// share is " (31%)", the part of total that used is; empty without a total.
func share(used, total resource.Quantity) string {
	t := total.AsApproximateFloat64()
	if t <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%d%%)", int(used.AsApproximateFloat64()*100/t))
}

func (d *describeWriter) agent(a *v1alpha1.AgentStatus) {
	if a == nil {
		d.field(0, "Agent:", noneList)
		return
	}
	d.heading("Agent:")
	d.field(1, "Version:", orNone(a.Version))
	d.field(1, "Connected To:", orNone(a.ConnectedTo))
	d.field(1, "Transport:", orNone(a.Transport))
	d.field(1, "Connected Since:", d.when(a.ConnectedAt))
	d.field(1, "Clock Skew:", orNone(a.ClockSkew))
}

// when is a timestamp in UTC and its age: "2026-05-01T10:00:00Z (5m ago)".
func (d *describeWriter) when(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age(d.now, t.Time))
}

func (d *describeWriter) lease(l *coordinationv1.Lease) {
	if l == nil {
		d.field(0, "Lease:", noneList)
		return
	}
	holder := none
	if l.Spec.HolderIdentity != nil {
		holder = orNone(*l.Spec.HolderIdentity)
	}
	d.heading("Lease:")
	d.field(1, "Holder:", holder)
	d.field(1, "Renewed:", leaseRenewed(l, d.now)+" ago / "+seconds(l.Spec.LeaseDurationSeconds))
	d.field(1, "State:", leaseState(l, d.now))
	d.field(1, "Transitions:", transitions(l))
}

// events tabulates the latest maxDescribedEvents events, oldest first.
func (d *describeWriter) events(events []corev1.Event) {
	if len(events) == 0 {
		d.field(0, "Events:", noneList)
		return
	}
	if len(events) > maxDescribedEvents {
		events = events[len(events)-maxDescribedEvents:]
	}
	d.heading("Events:")
	t := &table{header: []string{"TYPE", "REASON", "AGE", "COUNT", "MESSAGE"}}
	for i := range events {
		e := &events[i]
		t.add(orNone(e.Type), orNone(e.Reason), age(d.now, eventTime(e)),
			strconv.Itoa(int(eventCount(e))), oneLine(e.Message))
	}
	d.table(t)
}

// eventTime is when e last happened: lastTimestamp, else eventTime, else
// firstTimestamp (zero if it has none of them).
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// eventCount is how often e happened, from count or its series.
func eventCount(e *corev1.Event) int32 {
	switch {
	case e.Count > 0:
		return e.Count
	case e.Series != nil && e.Series.Count > 0:
		return e.Series.Count
	}
	return 1
}
