package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// schedulingText is how replicas are scheduled: Duplicated (also when
// unset, the default), Divided/Weighted or Divided/Aggregated.
func schedulingText(rs *v1alpha1.ReplicaSchedulingStrategy) string {
	if rs == nil || rs.ReplicaSchedulingType == "" {
		return v1alpha1.ReplicaSchedulingTypeDuplicated
	}
	if rs.ReplicaSchedulingType != v1alpha1.ReplicaSchedulingTypeDivided || rs.ReplicaDivisionPreference == "" {
		return rs.ReplicaSchedulingType
	}
	return rs.ReplicaSchedulingType + "/" + rs.ReplicaDivisionPreference
}

// labelSelectorText is a label selector in kubectl's syntax.
func labelSelectorText(sel *metav1.LabelSelector) string {
	return metav1.FormatLabelSelector(sel)
}

// affinityText sums up a cluster affinity on one line:
// "names=a,b; exclude=c; labels=env=prod; fields=region in (eu-1)".
func affinityText(a *v1alpha1.ClusterAffinity) string {
	if a == nil {
		return "any cluster"
	}
	var parts []string
	if len(a.ClusterNames) > 0 {
		parts = append(parts, "names="+strings.Join(a.ClusterNames, ","))
	}
	if len(a.Exclude) > 0 {
		parts = append(parts, "exclude="+strings.Join(a.Exclude, ","))
	}
	if a.LabelSelector != nil {
		parts = append(parts, "labels="+labelSelectorText(a.LabelSelector))
	}
	if a.FieldSelector != nil && len(a.FieldSelector.MatchExpressions) > 0 {
		parts = append(parts, "fields="+fieldSelectorText(a.FieldSelector))
	}
	if len(parts) == 0 {
		return "any cluster"
	}
	return strings.Join(parts, "; ")
}

// fieldSelectorText writes the expressions in label selector syntax.
func fieldSelectorText(fs *v1alpha1.FieldSelector) string {
	exprs := make([]string, len(fs.MatchExpressions))
	for i, e := range fs.MatchExpressions {
		switch e.Operator {
		case corev1.NodeSelectorOpIn:
			exprs[i] = fmt.Sprintf("%s in (%s)", e.Key, strings.Join(e.Values, ","))
		case corev1.NodeSelectorOpNotIn:
			exprs[i] = fmt.Sprintf("%s notin (%s)", e.Key, strings.Join(e.Values, ","))
		case corev1.NodeSelectorOpExists:
			exprs[i] = e.Key
		case corev1.NodeSelectorOpDoesNotExist:
			exprs[i] = "!" + e.Key
		default:
			exprs[i] = fmt.Sprintf("%s %s (%s)", e.Key, e.Operator, strings.Join(e.Values, ","))
		}
	}
	return strings.Join(exprs, ",")
}

// tolerationText writes a toleration as kubectl describe does:
// "cluster.flotilla.io/unreachable:NoExecute op=Exists for 300s".
func tolerationText(t corev1.Toleration) string {
	s := t.Key
	if t.Value != "" {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	if t.Operator == corev1.TolerationOpExists {
		s = strings.TrimSpace(s + " op=Exists")
	}
	if t.TolerationSeconds != nil {
		s += " for " + strconv.FormatInt(*t.TolerationSeconds, 10) + "s"
	}
	return s
}

// weightTexts lists the weights of Divided/Weighted scheduling, one line
// per static rule ("names=a,b: 2") or the dynamic weight.
func weightTexts(rs *v1alpha1.ReplicaSchedulingStrategy) []string {
	if rs == nil || rs.WeightPreference == nil {
		return nil
	}
	wp := rs.WeightPreference
	var lines []string
	for _, w := range wp.StaticWeightList {
		lines = append(lines, fmt.Sprintf("%s: %d", affinityText(&w.TargetCluster), w.Weight))
	}
	if wp.DynamicWeight != "" {
		lines = append(lines, "dynamic: "+wp.DynamicWeight)
	}
	return lines
}

// spreadText is one spread constraint: "region min=2 max=3".
func spreadText(s v1alpha1.SpreadConstraint) string {
	by := s.SpreadByField
	if s.SpreadByLabel != "" {
		by = "label " + s.SpreadByLabel
	}
	text := orNone(by)
	if s.MinGroups > 0 {
		text += fmt.Sprintf(" min=%d", s.MinGroups)
	}
	if s.MaxGroups > 0 {
		text += fmt.Sprintf(" max=%d", s.MaxGroups)
	}
	return text
}
