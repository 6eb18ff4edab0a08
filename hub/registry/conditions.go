package registry

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// maxConditionMessage bounds the part of an agent's health message a
// condition repeats.
const maxConditionMessage = 256

// reportConditionsLocked sets the conditions the hub derives from the
// agent's report, for ClusterTaintPolicies to match: APIServerHealthy as
// the agent reports it (no thresholds: those are Ready's), and NodesReady,
// False while fewer than all nodes are Ready (unless the report was
// refused as implausible, or counts no nodes). The types are fixed and the
// messages bounded: an agent chooses only their status. The agent's own
// message is taken only with a change of status, so an agent varying it
// cannot make every report a write. A change of status is written with
// the next flush, like Ready; a new node count only at the report pace.
func (r *Registry) reportConditionsLocked(cluster string, e *entry, report *protocol.ClusterStatus, plausible bool, now time.Time) {
	conds := &e.obj.Status.Conditions
	status, reason, message := metav1.ConditionTrue, v1alpha1.ReasonAPIServerHealthy, "the agent reports its API server healthy"
	if !report.APIServerHealthy {
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonAPIServerUnhealthy
		message = "the agent reports its API server unhealthy: " + truncate(report.HealthMessage, maxConditionMessage)
	}
	if prev := meta.FindStatusCondition(*conds, v1alpha1.ClusterConditionAPIServerHealthy); prev == nil || prev.Status != status {
		r.setConditionLocked(cluster, conds, metav1.Condition{Type: v1alpha1.ClusterConditionAPIServerHealthy, Status: status, Reason: reason, Message: message}, now)
	}
	if !plausible || report.NodesTotal <= 0 {
		return
	}
	status, reason = metav1.ConditionTrue, v1alpha1.ReasonNodesReady
	if report.NodesReady < report.NodesTotal {
		status, reason = metav1.ConditionFalse, v1alpha1.ReasonNodesNotReady
	}
	message = fmt.Sprintf("%d of %d nodes Ready", report.NodesReady, report.NodesTotal)
	prev := meta.FindStatusCondition(*conds, v1alpha1.ClusterConditionNodesReady)
	switch {
	case prev == nil || prev.Status != status:
		r.setConditionLocked(cluster, conds, metav1.Condition{Type: v1alpha1.ClusterConditionNodesReady, Status: status, Reason: reason, Message: message}, now)
	case prev.Message != message:
		prev.Message = message
		r.reportChangedLocked(cluster)
	}
}

// setConditionLocked sets a condition whose status changed and has the
// cluster written at the next flush.
func (r *Registry) setConditionLocked(cluster string, conds *[]metav1.Condition, c metav1.Condition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(conds, c)
	r.dirty[cluster] = true
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
