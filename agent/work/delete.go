package work

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// errTerminating says a delete waits for objects that are going away
// (finalizers); it is retried with backoff, and sooner when a watch sees
// them change.
var errTerminating = errors.New("objects still terminating")

// deleteWork deletes every object the Work's record names, and the record
// once they are all gone. Objects that are not the Work's are left alone.
func (e *Engine) deleteWork(op *operation) error {
	remaining := deleteOrder(op.record.all())
	// The second pass sees the objects that went at once, which is most.
	for pass := 0; pass < 2 && len(remaining) > 0; pass++ {
		var left []objectRef
		var errs []error
		for _, ref := range remaining {
			gone, err := e.removeObject(op.ctx, ref, op.work, op.asked)
			if err != nil {
				errs = append(errs, err)
			}
			if !gone {
				left = append(left, ref)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		remaining = left
	}
	if len(remaining) > 0 {
		return fmt.Errorf("%w: %d, the first %s", errTerminating, len(remaining), remaining[0])
	}
	if err := e.records.remove(op.ctx, op.work); err != nil {
		return err
	}
	e.setRecord(op.work, nil)
	return nil
}

// deleteOrder puts namespaces last and CRDs just before them, the reverse
// of the apply order, so that a namespace or a CRD does not take the other
// objects with it before they are checked.
func deleteOrder(refs []objectRef) []objectRef {
	rank := func(r objectRef) int {
		switch r.gvk().GroupKind() {
		case namespaceKind:
			return 2
		case crdKind:
			return 1
		}
		return 0
	}
	out := slices.Clone(refs)
	slices.SortStableFunc(out, func(a, b objectRef) int { return rank(a) - rank(b) })
	return out
}

// prune deletes the objects a new generation dropped, without waiting for
// them to go.
func (e *Engine) prune(op *operation, stale []objectRef) error {
	var errs []error
	for _, ref := range stale {
		if _, err := e.removeObject(op.ctx, ref, op.work, map[identity]types.UID{}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var background = metav1.DeletePropagationBackground

// removeObject asks ref's object to go, if it is the Work's and the member
// policy allows. gone reports that it is no longer there as the Work's
// object: not found, someone else's, or a new object since asked recorded
// the UID it deleted; an object outside the policy is left where it is and
// counts as gone.
func (e *Engine) removeObject(ctx context.Context, ref objectRef, work string, asked map[identity]types.UID) (gone bool, err error) {
	if err := e.admit(ref); err != nil {
		e.log.Warn("not deleting an object outside the member policy: it stays in the cluster", "work", work, "err", err)
		return true, nil
	}
	obj, err := e.owned(ctx, ref, work)
	switch {
	case errors.Is(err, errNotManaged):
		return true, nil
	case err != nil:
		return false, err
	case obj == nil:
		return true, nil
	}
	if uid, ok := asked[ref.identity()]; ok && uid != obj.GetUID() {
		return true, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	uid := obj.GetUID()
	err = e.resource(ref).Delete(ctx, ref.Name, metav1.DeleteOptions{
		PropagationPolicy: &background,
		// Never delete an object that replaced the one just read.
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsConflict(err): // replaced meanwhile: look again next time
		return false, nil
	case err != nil:
		return false, fmt.Errorf("%s: delete: %w", ref, err)
	}
	asked[ref.identity()] = uid
	return false, nil
}
