package dispatch

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/protocol"
)

// recordStatus stores what the agent reports of a Work's objects, for the
// generation the Work's status says was applied.
func (s *session) recordStatus(ctx context.Context, m *protocol.WorkStatus) {
	s.updateStatus(ctx, m.Name, func(w *v1alpha1.Work) bool {
		if m.Generation != w.Status.ObservedGeneration {
			return false // the agent will report the newer generation
		}
		return s.setManifests(w, m.Manifests)
	})
}

// recordApplied stores the generation the agent applied and how it went.
func (s *session) recordApplied(ctx context.Context, m *protocol.WorkApplied, fromInventory bool) {
	var restored, refused *v1alpha1.Work
	s.updateStatus(ctx, m.Name, func(w *v1alpha1.Work) bool {
		restored, refused = nil, nil
		if w.DeletionTimestamp != nil {
			return false
		}
		cond := metav1.Condition{Type: v1alpha1.WorkConditionApplied, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonAppliedSuccessful, Message: "applied by the agent", ObservedGeneration: m.Generation}
		if fromInventory {
			cond.Message = "held by the agent at this generation"
		}
		if !m.Applied {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonAppliedFailed, m.Message
			if m.Reason == protocol.ReasonRefusedByMemberPolicy {
				cond.Reason = v1alpha1.ReasonRefusedByMemberPolicy
			}
		}
		if m.Generation > w.Generation || m.Generation < w.Status.ObservedGeneration {
			return false // from an older session, or not from this hub's Work
		}
		changed := meta.SetStatusCondition(&w.Status.Conditions, cond)
		if changed && cond.Reason == v1alpha1.ReasonRefusedByMemberPolicy {
			refused = w
		}
		if m.Applied && w.Status.ObservedGeneration != m.Generation {
			w.Status.ObservedGeneration, changed = m.Generation, true
		}
		if m.Applied && !fromInventory && m.Generation == w.Generation && meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WorkConditionFenced) {
			changed = meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkConditionFenced,
				Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonFencedRestored, ObservedGeneration: m.Generation,
				Message: "the agent applied the Work again after it reconnected: its workloads run as the Work says"}) || changed
			restored = w
		}
		return s.setManifests(w, m.Manifests) || changed
	})
	if restored != nil {
		s.d.recorder.Event(workRef(restored), corev1.EventTypeNormal, "FencingLifted",
			"the agent applied the Work again after it reconnected: its workloads run as the Work says")
	}
	if refused != nil {
		s.recordRefused(refused, m.Message)
	}
}

// recordRefused tells, on the Work and on its Cluster (whose events the
// dashboard shows), that the member cluster's policy refused manifests of
// the Work; message names them and the rules. It is called when the
// Work's condition changes, not for every retry of the agent.
func (s *session) recordRefused(w *v1alpha1.Work, message string) {
	s.d.recorder.Event(workRef(w), corev1.EventTypeWarning, v1alpha1.ReasonRefusedByMemberPolicy, message)
	cluster := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: s.cluster}
	s.d.recorder.Event(cluster, corev1.EventTypeWarning, v1alpha1.ReasonRefusedByMemberPolicy, "Work "+w.Name+": "+message)
}

// recordFenced notes on a Work that its agent reported it fenced: the
// agent stopped its workloads while it was cut off from the hub.
func (s *session) recordFenced(ctx context.Context, name string) {
	const message = "the agent scaled the workloads to zero while it was cut off from the hub; the hub is sending the Work again to restore them"
	var fenced *v1alpha1.Work
	s.updateStatus(ctx, name, func(w *v1alpha1.Work) bool {
		fenced = nil
		if w.DeletionTimestamp != nil {
			return false
		}
		if meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkConditionFenced,
			Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonFencedCutOff, ObservedGeneration: w.Generation, Message: message}) {
			fenced = w
			return true
		}
		return false
	})
	if fenced != nil {
		s.d.recorder.Event(workRef(fenced), corev1.EventTypeWarning, "Fenced", message)
	}
}

func workRef(w *v1alpha1.Work) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindWork, Namespace: w.Namespace, Name: w.Name, UID: w.UID}
}

// setManifests replaces the manifest statuses if the report has any,
// bounded by boundedStatuses.
func (s *session) setManifests(w *v1alpha1.Work, results []protocol.ManifestResult) bool {
	if len(results) == 0 {
		return false
	}
	statuses, summary := boundedStatuses(results, w.Spec.StatePaths)
	changed := setTruncated(w, summary)
	if summary != "" && changed {
		s.d.limits.truncated.Add(1)
		s.logger.Warn("Work status stored in part", "work", w.Name, "reported", len(results), "stored", len(statuses), "why", summary)
	}
	if equality.Semantic.DeepEqual(w.Status.ManifestStatuses, statuses) {
		return changed
	}
	w.Status.ManifestStatuses = statuses
	return true
}

// recordDeleted removes the finalizer of a deleted Work whose objects the
// agent has deleted, so the Work goes; the session's loop has forgotten
// the Work already. A Work created anew meanwhile is sent afresh. The Work
// is read from the informer: an agent's answers cost the API a write only
// where a finalizer goes, and a read only when the informer's copy was
// behind.
func (s *session) recordDeleted(ctx context.Context, name string) {
	w := s.d.works.Get(s.namespace + "/" + name)
	if w == nil {
		// Gone, or never there (a Work only the agent listed); one created
		// since reaches the informer and is sent then.
		return
	}
	works := s.d.clients.Flotilla.FlotillaV1alpha1().Works(s.namespace)
	w = w.DeepCopy()
	for attempt := 1; ; attempt++ {
		switch {
		case w.DeletionTimestamp == nil:
			s.notify(name) // created anew: the agent no longer has it
			return
		case !slices.Contains(w.Finalizers, v1alpha1.WorkFinalizer):
			return // not the hub's to hold
		}
		// Only the version read: an Update carries its resourceVersion,
		// so a Work created anew meanwhile is never touched.
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == v1alpha1.WorkFinalizer })
		_, err := works.Update(ctx, w, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		switch {
		case err == nil:
			s.logger.Info("work deleted from the member cluster", "work", name)
			return
		case apierrors.IsNotFound(err):
			return
		case !apierrors.IsConflict(err) || attempt == updateRetries:
			s.logger.Error("remove the finalizer of a deleted Work", "work", name, "err", err)
			return
		}
		if w, err = works.Get(ctx, name, metav1.GetOptions{}); err != nil {
			if !apierrors.IsNotFound(err) {
				s.logger.Error("read Work after its deletion", "work", name, "err", err)
			}
			return
		}
	}
}

// resendDropped sends a Work again that the agent said it deleted
// although the hub wants it held, unless the hub has since sent its
// deletion (the agent answers that one).
func (s *session) resendDropped(name string) {
	if have, held := s.sent[name]; !held || have == deleteSent {
		return
	}
	s.forget(name)
	s.notify(name)
}

// forget drops what the session knows the agent holds of a Work.
func (s *session) forget(name string) {
	delete(s.sent, name)
	s.written.drop(name)
	delete(s.answered, name)
}

// updateRetries bounds retries of a status write that conflicts with
// other writes of the same Work (the binding controller's).
const updateRetries = 5

// updateStatus applies change to the Work's status and writes it through
// the status subresource if change says it changed something. A Conflict
// reads the Work again and retries.
func (s *session) updateStatus(ctx context.Context, name string, change func(*v1alpha1.Work) bool) {
	works := s.d.clients.Flotilla.FlotillaV1alpha1().Works(s.namespace)
	w := s.latest(name)
	for attempt := 1; w != nil; attempt++ {
		if !change(w) {
			return
		}
		updated, err := works.UpdateStatus(ctx, w, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		switch {
		case err == nil:
			s.written.set(name, updated)
			return
		case apierrors.IsNotFound(err):
			s.written.drop(name)
			return
		case !apierrors.IsConflict(err):
			s.logger.Error("store Work status", "work", name, "err", err)
			return
		case attempt == updateRetries:
			s.logger.Warn("Work status not stored after repeated conflicts", "work", name)
			return
		}
		w, err = works.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			s.written.drop(name)
			return
		}
		if err != nil {
			s.logger.Error("read Work", "work", name, "err", err)
			return
		}
	}
}

// latest returns a copy of the newest version of a Work the session
// knows, nil if none: the informer's, or the one it last wrote while the
// informer has not caught up with it. A newer generation in the informer
// is a spec write after that; otherwise a version in the informer other
// than the written one is taken to be older (if it is not, the write
// conflicts and reads the Work again).
func (s *session) latest(name string) *v1alpha1.Work {
	cached := s.d.works.Get(s.namespace + "/" + name)
	mine, ok := s.written.get(name)
	switch {
	case !ok:
	case cached == nil || cached.Generation < mine.Generation ||
		cached.Generation == mine.Generation && cached.ResourceVersion != mine.ResourceVersion:
		return mine.DeepCopy()
	default:
		s.written.drop(name) // the informer has it, or something newer
	}
	if cached == nil {
		return nil
	}
	return cached.DeepCopy()
}

// writtenWorks holds the Works as a session last wrote them, until the
// informer has caught up: the next report about a Work builds on the
// status just written, not on an older one. The status writers of several
// Works use it at once.
type writtenWorks struct {
	mu    sync.Mutex
	works map[string]*v1alpha1.Work
}

func (w *writtenWorks) get(name string) (*v1alpha1.Work, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	work, ok := w.works[name]
	return work, ok
}

func (w *writtenWorks) set(name string, work *v1alpha1.Work) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.works[name] = work
}

func (w *writtenWorks) drop(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.works, name)
}
