package dispatch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// record acts on one message from the agent.
func (s *session) record(ctx context.Context, m protocol.Message) {
	switch m := m.(type) {
	case *protocol.WorkApplied:
		s.d.recordApplied(ctx, s.cluster, m, false)
	case *protocol.WorkStatus:
		s.d.updateWork(ctx, s.cluster, m.Name, func(w *v1alpha1.Work) bool {
			if m.Generation != w.Status.ObservedGeneration {
				return false // the agent will report the newer generation
			}
			return setManifests(w, m.Manifests)
		})
	case *protocol.WorkDeleted:
		s.recordDeleted(ctx, m.Name)
	default:
		s.logger.Warn("unexpected message on the work stream; ignored", "type", m.Type())
	}
}

// recordApplied stores the generation the agent applied and how it went.
func (d *Dispatcher) recordApplied(ctx context.Context, cluster string, m *protocol.WorkApplied, fromInventory bool) {
	d.updateWork(ctx, cluster, m.Name, func(w *v1alpha1.Work) bool {
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
		}
		if m.Generation > w.Generation || m.Generation < w.Status.ObservedGeneration {
			return false // from an older session, or not from this hub's Work
		}
		changed := meta.SetStatusCondition(&w.Status.Conditions, cond)
		if m.Applied && w.Status.ObservedGeneration != m.Generation {
			w.Status.ObservedGeneration, changed = m.Generation, true
		}
		if m.Applied && !fromInventory && m.Generation == w.Generation && meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WorkConditionFenced) {
			changed = meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkConditionFenced,
				Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonFencedRestored, ObservedGeneration: m.Generation,
				Message: "the agent applied the Work again after it reconnected: its workloads run as the Work says"}) || changed
		}
		return setManifests(w, m.Manifests) || changed
	})
}

// recordFenced notes on a Work that its agent reported it fenced: the
// agent stopped its workloads while it was cut off from the hub.
func (d *Dispatcher) recordFenced(ctx context.Context, cluster, name string) {
	d.updateWork(ctx, cluster, name, func(w *v1alpha1.Work) bool {
		if w.DeletionTimestamp != nil {
			return false
		}
		return meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.WorkConditionFenced,
			Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonFencedCutOff, ObservedGeneration: w.Generation,
			Message: "the agent scaled the workloads to zero while it was cut off from the hub; the hub is sending the Work again to restore them"})
	})
}

// setManifests replaces the manifest statuses if the report has any.
func setManifests(w *v1alpha1.Work, results []protocol.ManifestResult) bool {
	if len(results) == 0 {
		return false
	}
	statuses := make([]v1alpha1.ManifestStatus, len(results))
	for i, r := range results {
		statuses[i] = v1alpha1.ManifestStatus{
			Identifier: v1alpha1.ResourceIdentifier{Ordinal: r.Ordinal, Group: r.Group, Version: r.Version, Kind: r.Kind,
				Resource: r.Resource, Namespace: r.Namespace, Name: r.Name},
			Health: r.Health, Message: r.Message,
		}
		if len(r.Status) > 0 {
			statuses[i].Status = &runtime.RawExtension{Raw: r.Status}
		}
	}
	if equality.Semantic.DeepEqual(w.Status.ManifestStatuses, statuses) {
		return false
	}
	w.Status.ManifestStatuses = statuses
	return true
}

// recordDeleted removes a tombstone the agent has cleared. A Work that was
// wanted again meanwhile is sent afresh.
func (s *session) recordDeleted(ctx context.Context, name string) {
	delete(s.sent, name)
	namespace := v1alpha1.ExecutionNamespace(s.cluster)
	w, err := s.d.objs.Works.Get(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		s.logger.Error("read Work after its deletion", "work", name, "err", err)
		return
	case w.DeletionTimestamp == nil:
		s.notify(name)
		return
	}
	// Only the tombstone just read: a Work wanted again meanwhile must stay.
	txn := s.d.objs.Store.NewTxn()
	s.d.objs.Works.TxnDelete(txn, namespace, name, w.ResourceVersion)
	if _, err := txn.Commit(ctx); err != nil {
		if apierrors.IsConflict(err) {
			s.notify(name) // changed meanwhile: look again
			return
		}
		s.logger.Error("remove Work tombstone", "work", name, "err", err)
		return
	}
	s.logger.Info("work deleted from the member cluster", "work", name)
}

// updateRetries bounds retries of a status write that conflicts with the
// binding controller's writes of the same Work.
const updateRetries = 5

// updateWork applies change to the stored Work and writes it if change
// says it changed something.
func (d *Dispatcher) updateWork(ctx context.Context, cluster, name string, change func(*v1alpha1.Work) bool) {
	namespace := v1alpha1.ExecutionNamespace(cluster)
	for range updateRetries {
		w, err := d.objs.Works.Get(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil {
			if !change(w) {
				return
			}
			_, err = d.objs.Works.Update(ctx, w)
		}
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			d.logger.Error("store Work status", "cluster", cluster, "work", name, "err", fmt.Errorf("%w", err))
			return
		}
	}
	d.logger.Warn("Work status not stored after repeated conflicts", "cluster", cluster, "work", name)
}
