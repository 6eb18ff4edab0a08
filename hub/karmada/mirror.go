// Package karmada lets Karmada's own documents be applied to the hub as
// they are written, with kubectl or any GitOps tool: the hub serves
// policy.karmada.io/v1alpha1 PropagationPolicy, ClusterPropagationPolicy
// and ClusterTaintPolicy and apps.karmada.io/v1alpha1 WorkloadRebalancer (CRDs with Flotilla's
// schemas, crds.Karmada), and the Mirror keeps a flotilla.io twin of each
// such object, which the controllers act on.
//
// A twin has the source's kind, name, namespace, spec, labels and
// annotations (not kubectl's last-applied configuration), plus the label
// LabelMirrorOf naming the source's group. The Mirror creates it, puts it
// back as the source says when anything else changes it, and deletes it
// when the source is deleted. A WorkloadRebalancer's status is copied from
// its twin to the source, so `kubectl get workloadrebalancers.apps.karmada.io`
// shows how the rebalance went.
//
// Deleting a twin deletes its source: `kubectl delete propagationpolicy X`
// finds the flotilla.io twin first (discovery orders flotilla.io before
// policy.karmada.io), and the user means the policy, so it is not put
// back; a finished rebalancer that the rebalancer controller deletes after
// its TTL takes its source with it. The source carries the annotation
// AnnotationMirrorUID, the UID of the twin made for it, to tell a deleted
// twin from one not made yet; a twin's absence is checked in the API
// server before the source is deleted, since that is final.
//
// A flotilla.io object of the same name that the Mirror did not make (one
// applied with `flotilla apply`, which converts Karmada's documents itself)
// is left alone: the source gets a Warning event NameTaken and no twin.
package karmada

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Marks of the mirror.
const (
	// LabelMirrorOf is on every twin: the API group of its source.
	LabelMirrorOf = "flotilla.io/mirror-of"
	// AnnotationMirrorUID is on every source once its twin exists.
	AnnotationMirrorUID = "flotilla.io/mirror-uid"
	// ReasonNameTaken: a flotilla.io object of the source's name exists.
	ReasonNameTaken = "NameTaken"
)

// lastApplied is kubectl's record of the source, not the twin's.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// kind is one Karmada kind and its Flotilla twin.
type kind struct {
	source, target schema.GroupVersionResource
	kind           string
	// status: the twin's status is copied to the source.
	status  bool
	sources *controller.Shared[*unstructured.Unstructured]
	twins   twins
}

// Mirror keeps the flotilla.io twins of Karmada's documents.
type Mirror struct {
	dynamic  dynamic.Interface
	factory  dynamicinformer.DynamicSharedInformerFactory
	recorder controller.Recorder
	logger   *slog.Logger
	kinds    []*kind
	queue    *controller.Queue
}

// New returns a Mirror that reads twins from the shared informers and
// Karmada's documents from informers of its own, and writes through
// clients. It adds its handlers; Run starts it.
func New(clients *kube.Clients, informers *controller.Informers, recorder controller.Recorder, logger *slog.Logger) *Mirror {
	m := &Mirror{dynamic: clients.Dynamic, factory: dynamicinformer.NewDynamicSharedInformerFactory(clients.Dynamic, 0),
		recorder: recorder, logger: logger.With("controller", "karmada-mirror")}
	policies := v1alpha1.SchemeGroupVersion.WithResource("propagationpolicies")
	clusterPolicies := v1alpha1.SchemeGroupVersion.WithResource("clusterpropagationpolicies")
	rebalancers := appsv1alpha1.SchemeGroupVersion.WithResource("workloadrebalancers")
	taintPolicies := v1alpha1.SchemeGroupVersion.WithResource("clustertaintpolicies")
	m.kinds = []*kind{
		{target: policies, kind: v1alpha1.KindPropagationPolicy, twins: typedTwins(informers.Policies, policies, v1alpha1.KindPropagationPolicy)},
		{target: clusterPolicies, kind: v1alpha1.KindClusterPropagationPolicy, twins: typedTwins(informers.ClusterPolicies, clusterPolicies, v1alpha1.KindClusterPropagationPolicy)},
		{target: rebalancers, kind: appsv1alpha1.KindWorkloadRebalancer, status: true, twins: typedTwins(informers.Rebalancers, rebalancers, appsv1alpha1.KindWorkloadRebalancer)},
		{target: taintPolicies, kind: v1alpha1.KindClusterTaintPolicy, twins: typedTwins(informers.TaintPolicies, taintPolicies, v1alpha1.KindClusterTaintPolicy)},
	}
	m.queue = controller.NewQueue("karmada-mirror", m.reconcile, logger)
	for i, k := range m.kinds {
		k.source = schema.GroupVersionResource{Group: crds.KarmadaGroup(k.target.Group, k.kind), Version: k.target.Version, Resource: k.target.Resource}
		k.sources = controller.NewShared[*unstructured.Unstructured](m.factory.ForResource(k.source).Informer())
		k.sources.AddHandler(func(old, cur *unstructured.Unstructured) { m.enqueue(i, old, cur) })
		k.twins.addHandler(func(key string) { m.queue.Add(queueKey(i, key)) })
	}
	return m
}

func (m *Mirror) enqueue(i int, old, cur *unstructured.Unstructured) {
	obj := cur
	if obj == nil {
		obj = old
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		m.queue.Add(queueKey(i, key))
	}
}

// Run runs the mirror until ctx ends.
func (m *Mirror) Run(ctx context.Context, workers int) {
	m.factory.Start(ctx.Done())
	syncers := make([]controller.Syncer, 0, 2*len(m.kinds))
	for _, k := range m.kinds {
		syncers = append(syncers, k.sources, k.twins.syncer())
	}
	if !controller.StartAndSync(ctx, syncers...) {
		return
	}
	m.queue.Run(ctx, workers)
}

// queueKey is the key of an object of m.kinds[i] in the queue.
func queueKey(i int, key string) string { return strconv.Itoa(i) + "|" + key }

func parseQueueKey(s string) (int, string, error) {
	idx, key, _ := strings.Cut(s, "|")
	i, err := strconv.Atoi(idx)
	if err != nil {
		return 0, "", fmt.Errorf("bad queue key %q", s)
	}
	return i, key, nil
}

// reconcile brings one twin (and the source's status) in line with its
// source.
func (m *Mirror) reconcile(ctx context.Context, qkey string) error {
	i, key, err := parseQueueKey(qkey)
	if err != nil || i < 0 || i >= len(m.kinds) {
		return nil
	}
	k := m.kinds[i]
	src := k.sources.Get(key)
	twin, err := k.twins.get(key)
	if err != nil {
		return err
	}
	if twin != nil && twin.GetLabels()[LabelMirrorOf] == "" {
		if src != nil {
			m.recorder.Event(ref(k, src), corev1.EventTypeWarning, ReasonNameTaken,
				fmt.Sprintf("%s %s exists and was not made from this object (applied with flotilla apply?); delete one of them", k.target.GroupResource(), key))
		}
		return nil
	}
	switch {
	case src == nil && twin == nil:
		return nil
	case src == nil:
		return m.deleteTwin(ctx, k, twin)
	case twin == nil && src.GetAnnotations()[AnnotationMirrorUID] != "":
		return m.twinDeleted(ctx, k, src)
	case twin == nil:
		return m.createTwin(ctx, k, src)
	}
	if err := m.updateTwin(ctx, k, src, twin); err != nil {
		return err
	}
	return m.copyBack(ctx, k, src, twin)
}

// desired is the twin src asks for.
func desired(k *kind, src *unstructured.Unstructured) *unstructured.Unstructured {
	t := &unstructured.Unstructured{Object: map[string]any{}}
	t.SetAPIVersion(k.target.GroupVersion().String())
	t.SetKind(k.kind)
	t.SetName(src.GetName())
	t.SetNamespace(src.GetNamespace())
	labels := maps.Clone(src.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelMirrorOf] = k.source.Group
	t.SetLabels(labels)
	annotations := maps.Clone(src.GetAnnotations())
	delete(annotations, lastApplied)
	delete(annotations, AnnotationMirrorUID)
	if len(annotations) > 0 {
		t.SetAnnotations(annotations)
	}
	if spec, ok := src.Object["spec"]; ok {
		t.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return t
}

func (m *Mirror) createTwin(ctx context.Context, k *kind, src *unstructured.Unstructured) error {
	created, err := m.api(k.target, src.GetNamespace()).Create(ctx, desired(k, src), metav1.CreateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return nil // the twin's informer event brings the key back
	}
	if err != nil {
		return fmt.Errorf("create %s twin of %s: %w", k.target.GroupResource(), src.GetName(), err)
	}
	m.logger.Info("twin created", "resource", k.target.GroupResource().String(), "namespace", src.GetNamespace(), "name", src.GetName())
	return m.setSourceUID(ctx, k, src, string(created.GetUID()))
}

// setSourceUID records on the source which twin was made for it.
func (m *Mirror) setSourceUID(ctx context.Context, k *kind, src *unstructured.Unstructured, uid string) error {
	if src.GetAnnotations()[AnnotationMirrorUID] == uid {
		return nil
	}
	next := src.DeepCopy()
	annotations := next.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationMirrorUID] = uid
	next.SetAnnotations(annotations)
	_, err := m.api(k.source, src.GetNamespace()).Update(ctx, next, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("mark %s %s with its twin: %w", k.source.GroupResource(), src.GetName(), err)
	}
	return nil
}

func (m *Mirror) updateTwin(ctx context.Context, k *kind, src, twin *unstructured.Unstructured) error {
	if err := m.setSourceUID(ctx, k, src, string(twin.GetUID())); err != nil {
		return err
	}
	want := desired(k, src)
	if equality.Semantic.DeepEqual(want.Object["spec"], twin.Object["spec"]) &&
		equality.Semantic.DeepEqual(want.GetLabels(), twin.GetLabels()) &&
		equality.Semantic.DeepEqual(want.GetAnnotations(), twin.GetAnnotations()) {
		return nil
	}
	next := twin.DeepCopy()
	next.SetLabels(want.GetLabels())
	next.SetAnnotations(want.GetAnnotations())
	if spec, ok := want.Object["spec"]; ok {
		next.Object["spec"] = spec
	} else {
		delete(next.Object, "spec")
	}
	if _, err := m.api(k.target, src.GetNamespace()).Update(ctx, next, metav1.UpdateOptions{FieldManager: controller.FieldManager}); err != nil {
		return fmt.Errorf("update %s twin of %s: %w", k.target.GroupResource(), src.GetName(), err)
	}
	return nil
}

// copyBack writes the twin's status on the source (rebalancers).
func (m *Mirror) copyBack(ctx context.Context, k *kind, src, twin *unstructured.Unstructured) error {
	if !k.status {
		return nil
	}
	// A typed twin without status converts to an empty one.
	status, _ := twin.Object["status"].(map[string]any)
	if len(status) == 0 || equality.Semantic.DeepEqual(status, src.Object["status"]) {
		return nil
	}
	next := src.DeepCopy()
	next.Object["status"] = runtime.DeepCopyJSONValue(status)
	_, err := m.api(k.source, src.GetNamespace()).UpdateStatus(ctx, next, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("copy status of %s to %s: %w", k.target.GroupResource(), src.GetName(), err)
	}
	return nil
}

// deleteTwin removes the twin of a deleted source.
func (m *Mirror) deleteTwin(ctx context.Context, k *kind, twin *unstructured.Unstructured) error {
	uid := twin.GetUID()
	err := m.api(k.target, twin.GetNamespace()).Delete(ctx, twin.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s twin %s: %w", k.target.GroupResource(), twin.GetName(), err)
	}
	m.logger.Info("twin deleted with its source", "resource", k.target.GroupResource().String(), "namespace", twin.GetNamespace(), "name", twin.GetName())
	return nil
}

// twinDeleted deletes a source whose twin was deleted, once the API server
// confirms the twin is gone (the informer may not have seen it made).
func (m *Mirror) twinDeleted(ctx context.Context, k *kind, src *unstructured.Unstructured) error {
	_, err := m.api(k.target, src.GetNamespace()).Get(ctx, src.GetName(), metav1.GetOptions{})
	if err == nil {
		// The informer is behind (the twin, or another object of that
		// name, exists); its event brings the key back.
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s twin of %s: %w", k.target.GroupResource(), src.GetName(), err)
	}
	uid, rv := src.GetUID(), src.GetResourceVersion()
	err = m.api(k.source, src.GetNamespace()).Delete(ctx, src.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // changed since: the new version is reconciled
	}
	if err != nil {
		return fmt.Errorf("delete %s %s after its twin: %w", k.source.GroupResource(), src.GetName(), err)
	}
	m.logger.Info("source deleted with its twin", "resource", k.source.GroupResource().String(), "namespace", src.GetNamespace(), "name", src.GetName())
	return nil
}

// api is resource gvr, in namespace unless it is "".
func (m *Mirror) api(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return m.dynamic.Resource(gvr)
	}
	return m.dynamic.Resource(gvr).Namespace(namespace)
}

func ref(k *kind, obj *unstructured.Unstructured) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: k.source.GroupVersion().String(), Kind: k.kind,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}
