package writecapacity

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// scratchMeta is the metadata of a new scratch object: a generated name
// in the scratch namespace, nothing copied from a sample.
func (s *scratch) scratchMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: s.ns, GenerateName: "probe-"}
}

// binding is a scratch ResourceBinding: the sample's spec without
// placement, clusters or eviction tasks, so that no controller places it,
// renders it or evicts from it.
func (s *scratch) binding() *v1alpha1.ResourceBinding {
	b := &v1alpha1.ResourceBinding{ObjectMeta: s.scratchMeta()}
	if s.samples.Binding != nil {
		b.Spec = *s.samples.Binding.Spec.DeepCopy()
	}
	b.Spec.Placement, b.Spec.Clusters, b.Spec.GracefulEvictionTasks, b.Spec.Failover, b.Spec.RescheduleTriggeredAt = nil, nil, nil, nil, nil
	b.Spec.Resource = v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: s.ns, Name: "probe"}
	if b.Spec.Replicas == 0 {
		b.Spec.Replicas = 3
	}
	return b
}

// bindingStatus gives b the sample's status (its aggregated status, the
// bulk of a binding) and the probe's condition saying n.
func (s *scratch) bindingStatus(b *v1alpha1.ResourceBinding, n int) {
	if s.samples.Binding != nil && len(b.Status.AggregatedStatus) == 0 {
		b.Status = *s.samples.Binding.Status.DeepCopy()
	}
	b.Status.Conditions = probeStatus(b.Status.Conditions, n)
}

// work is a scratch Work: the sample's manifests, or a small ConfigMap,
// in a namespace that is no cluster's execution namespace.
func (s *scratch) work() *v1alpha1.Work {
	w := &v1alpha1.Work{ObjectMeta: s.scratchMeta()}
	if s.samples.Work != nil {
		w.Spec.Workload = *s.samples.Work.Spec.Workload.DeepCopy()
		return w
	}
	raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "probe", "namespace": "default"}, "data": map[string]string{"key": "value"}})
	w.Spec.Workload.Manifests = []v1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}
	return w
}

func (s *scratch) workStatus(w *v1alpha1.Work, n int) {
	if s.samples.Work != nil && len(w.Status.ManifestStatuses) == 0 {
		w.Status = *s.samples.Work.Status.DeepCopy()
	}
	w.Status.Conditions = probeStatus(w.Status.Conditions, n)
}

// deployment is a scratch Deployment: the sample's spec, or a small one.
// The namespace is the hub's own, so it is no template.
func (s *scratch) deployment() *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: s.scratchMeta()}
	if s.samples.Deployment != nil {
		d.Spec = *s.samples.Deployment.Spec.DeepCopy()
		d.Labels = s.samples.Deployment.Labels
		return d
	}
	labels := map[string]string{"app": "probe"}
	d.Labels = labels
	d.Spec = appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}}
	return d
}

// deploymentStatus changes what the hub writes of a template: its
// replica counts and a condition.
func deploymentStatus(d *appsv1.Deployment, n int) {
	replicas := int32(n % 4)
	d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = replicas, replicas, replicas, replicas
	cond := appsv1.DeploymentCondition{Type: probeCondition, Status: corev1.ConditionTrue, Reason: "Probe", Message: fmt.Sprint(n),
		LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == probeCondition {
			d.Status.Conditions[i] = cond
			return
		}
	}
	d.Status.Conditions = append(d.Status.Conditions, cond)
}

// event is a scratch Event about a scratch binding, as the hub records
// them.
func (s *scratch) event() *corev1.Event {
	obj := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "ResourceBinding", Namespace: s.ns, Name: "probe"}
	return eventFor(s.ns, "probe", obj)
}

// eventPatch is the patch of a repeated event, as client-go's recorder
// sends it: a new count and last timestamp.
func eventPatch(n int) []byte {
	body, _ := json.Marshal(map[string]any{"count": n + 1, "lastTimestamp": time.Now().UTC().Format(time.RFC3339)})
	return body
}

// lease is a scratch Lease, as the hub renews them.
func (s *scratch) lease() *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{ObjectMeta: s.scratchMeta(), Spec: coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("probe"), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
}
