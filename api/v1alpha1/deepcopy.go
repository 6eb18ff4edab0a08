package v1alpha1

// Hand-written deep copies: the types are few and small, and copies are
// taken on every API read and store write.

// DeepCopy returns a deep copy of the cluster.
func (c *Cluster) DeepCopy() *Cluster {
	if c == nil {
		return nil
	}
	out := &Cluster{TypeMeta: c.TypeMeta}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = c.Spec
	if c.Spec.Taints != nil {
		out.Spec.Taints = make([]corev1Taint, len(c.Spec.Taints))
		for i := range c.Spec.Taints {
			c.Spec.Taints[i].DeepCopyInto(&out.Spec.Taints[i])
		}
	}
	c.Status.deepCopyInto(&out.Status)
	return out
}

// DeepCopy returns a deep copy of the status.
func (s *ClusterStatus) DeepCopy() *ClusterStatus {
	out := &ClusterStatus{}
	s.deepCopyInto(out)
	return out
}

func (s *ClusterStatus) deepCopyInto(out *ClusterStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if s.NodeSummary != nil {
		summary := *s.NodeSummary
		out.NodeSummary = &summary
	}
	if s.ResourceSummary != nil {
		out.ResourceSummary = &ResourceSummary{
			Allocatable: s.ResourceSummary.Allocatable.DeepCopy(),
			Allocated:   s.ResourceSummary.Allocated.DeepCopy(),
		}
	}
	if s.Agent != nil {
		agent := *s.Agent
		agent.ConnectedAt = s.Agent.ConnectedAt.DeepCopy()
		out.Agent = &agent
	}
}
