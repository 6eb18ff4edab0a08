package registry

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/protocol"
)

// A resource report feeds scheduling (dynamic weights divide replicas by
// the room clusters report), so a report no real cluster could send is
// refused: its summary is not stored (the cluster then has no room for
// capacity-weighted workloads), and the Cluster says why in the condition
// ResourcesPlausible and an event. The bounds are far above real nodes.
const (
	// ClusterConditionResourcesPlausible is False while the agent's last
	// resource report was refused.
	ClusterConditionResourcesPlausible = "ResourcesPlausible"
	reasonImplausibleReport            = "ImplausibleResourceReport"
	reasonPlausibleReport              = "PlausibleResourceReport"

	// maxReportedNodes is more than Kubernetes' tested 5,000 nodes with
	// room for KWOK-scale test clusters.
	maxReportedNodes = 50_000
)

// maxPerNode bounds one node's share of a resource; other resources get
// maxPerNodeOther.
var (
	maxPerNode = map[corev1.ResourceName]resource.Quantity{
		corev1.ResourceCPU:              resource.MustParse("1024"),
		corev1.ResourceMemory:           resource.MustParse("64Ti"),
		corev1.ResourcePods:             resource.MustParse("10000"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Pi"),
	}
	maxPerNodeOther = resource.MustParse("1M")
)

// implausible says why a report's resources cannot be a real cluster's,
// "" if they can. Quantities are non-negative already (protocol.Validate).
func implausible(report *protocol.ClusterStatus, allocatable, allocated corev1.ResourceList) string {
	if report.NodesTotal > maxReportedNodes {
		return fmt.Sprintf("%d nodes reported, more than %d", report.NodesTotal, maxReportedNodes)
	}
	nodes := int64(max(report.NodesTotal, 1))
	for _, list := range []struct {
		field string
		l     corev1.ResourceList
	}{{"allocatable", allocatable}, {"allocated", allocated}} {
		for _, name := range slices.Sorted(maps.Keys(list.l)) {
			q := list.l[name]
			bound, ok := maxPerNode[name]
			if !ok {
				bound = maxPerNodeOther
			}
			limit := bound.DeepCopy()
			limit.Mul(nodes)
			if q.Cmp(limit) > 0 {
				return fmt.Sprintf("%s %s of %s on %d nodes is more than %s per node", list.field, q.String(), name, report.NodesTotal, bound.String())
			}
		}
	}
	return ""
}

// resourcesPlausibleLocked records whether the cluster's last report was
// plausible: the condition changes (and an event says why) only when the
// verdict does; a cluster never refused carries no condition.
func (r *Registry) resourcesPlausibleLocked(cluster string, e *entry, why string, conditions *[]metav1.Condition) (changed bool) {
	prev := meta.FindStatusCondition(*conditions, ClusterConditionResourcesPlausible)
	if why == "" {
		if prev != nil && prev.Status != metav1.ConditionTrue {
			return meta.SetStatusCondition(conditions, metav1.Condition{Type: ClusterConditionResourcesPlausible, Status: metav1.ConditionTrue,
				Reason: reasonPlausibleReport, Message: "the agent's resource report is plausible again: it feeds scheduling", LastTransitionTime: metav1.NewTime(r.clock.Now())})
		}
		return false
	}
	message := "resource report refused, it does not feed scheduling: " + why
	if prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != message {
		r.recordLocked(e.obj, corev1.EventTypeWarning, reasonImplausibleReport, message, r.clock.Now())
		r.logger.Warn("implausible resource report refused", "cluster", cluster, "why", why)
		return meta.SetStatusCondition(conditions, metav1.Condition{Type: ClusterConditionResourcesPlausible, Status: metav1.ConditionFalse,
			Reason: reasonImplausibleReport, Message: message, LastTransitionTime: metav1.NewTime(r.clock.Now())})
	}
	return false
}

// Served APIs are the largest part of a status report (up to ~1 MiB) and
// each change is a Cluster write: an agent may change them a few times at
// once (a session's first report, CRDs installed), then once per
// apisInterval; a list held back is applied, newest first, with a later
// report.
const (
	apisBurst    = 3
	apisInterval = 30 * time.Second
)

// servedAPIsLocked returns the served APIs to store from this report (nil:
// none), holding back changes beyond the pace or while the store refuses
// agent-driven growth.
func (r *Registry) servedAPIsLocked(e *entry, apis *protocol.ServedAPIs, now time.Time) *protocol.ServedAPIs {
	if apis != nil {
		if e.pendingAPIs != nil {
			r.stats.apisCoalesced.Add(1)
		}
		e.pendingAPIs = apis
	}
	if e.pendingAPIs == nil {
		return nil
	}
	if e.apis == nil {
		e.apis = rate.NewLimiter(rate.Every(apisInterval), apisBurst)
	}
	if r.allowAgentWrite != nil && !r.allowAgentWrite() {
		return nil
	}
	if !e.apis.AllowN(now, 1) {
		return nil
	}
	apis, e.pendingAPIs = e.pendingAPIs, nil
	return apis
}
