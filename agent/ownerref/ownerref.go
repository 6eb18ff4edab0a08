// Package ownerref ties the objects the agent makes for itself in its
// namespace (its election Lease, its certificate Secret, the ConfigMaps
// recording its Works) to an owner that the agent's installation owns: a
// ServiceAccount of the Helm release. The member cluster's garbage
// collector then deletes them once the installation is removed, e.g. by
// `helm uninstall`. What the agent applies from Works never gets an owner:
// those objects are the user's.
//
// An owner that cannot be read never stops the agent: it warns once and
// writes its objects without the owner, as it does when none is configured.
package ownerref

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// RetryInterval is how long after a failed read the owner is read again:
// often enough to pick it up soon, seldom enough not to double the
// requests of a Lease renewed every few seconds.
const RetryInterval = time.Minute

// Owner is the ServiceAccount that owns the agent's own objects. A nil
// *Owner is no owner: its methods then leave objects as they are.
type Owner struct {
	client          kubernetes.Interface
	namespace, name string
	log             *slog.Logger
	clock           clock.PassiveClock

	mu       sync.Mutex
	ref      *metav1.OwnerReference // once read, kept
	failedAt time.Time              // of the last failed read
	warned   bool
}

// New is the owner ServiceAccount namespace/name, read with client; nil
// when name is empty (no owner). log hears of an owner that cannot be read.
func New(client kubernetes.Interface, namespace, name string, log *slog.Logger, clk clock.PassiveClock) *Owner {
	if name == "" {
		return nil
	}
	return &Owner{client: client, namespace: namespace, name: name, log: log, clock: clk}
}

// Ref is the reference to the owner, or nil: no owner configured, or it
// cannot be read now (a warning says so, once; it is read again on a call
// RetryInterval later). Once read, the owner's UID is kept for the life of
// the process, so that an object written after the owner was deleted (by
// an agent that is being uninstalled) still names it and is collected too.
func (o *Owner) Ref(ctx context.Context) *metav1.OwnerReference {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ref != nil {
		return o.ref
	}
	if !o.failedAt.IsZero() && o.clock.Since(o.failedAt) < RetryInterval {
		return nil
	}
	sa, err := o.client.CoreV1().ServiceAccounts(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	if err != nil {
		o.failedAt = o.clock.Now()
		if !o.warned && ctx.Err() == nil {
			o.warned = true
			o.log.Warn("cannot read the owner of the agent's Lease, certificate Secret and Work records: they are written without it, and removing the installation leaves them behind; retrying every "+RetryInterval.String(),
				"serviceAccount", o.namespace+"/"+o.name, "err", err)
		}
		return nil
	}
	if o.warned {
		o.log.Info("read the owner of the agent's objects", "serviceAccount", o.namespace+"/"+o.name)
	}
	o.ref = &metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID,
		// The owner's deletion never waits for its dependents: no
		// foreground deletion, and no right on the owner needed.
		BlockOwnerDeletion: ptr.To(false)}
	return o.ref
}

// Has reports whether refs hold ref (by UID); a nil ref is always held.
func Has(refs []metav1.OwnerReference, ref *metav1.OwnerReference) bool {
	return ref == nil || slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == ref.UID })
}

// With is refs with ref added unless held already; the others stay.
func With(refs []metav1.OwnerReference, ref *metav1.OwnerReference) []metav1.OwnerReference {
	if Has(refs, ref) {
		return refs
	}
	return append(slices.Clip(refs), *ref)
}

// PatchFunc sends a strategic merge patch to one object.
type PatchFunc func(ctx context.Context, patch []byte) error

// Adopt adds the owner to an object whose owner references are have, if
// they lack it (an object of an agent that ran without an owner), with
// patch: a strategic merge patch that leaves the object's other owners
// alone. what names the object in the warning logged if it fails; the
// next start tries again.
func (o *Owner) Adopt(ctx context.Context, what string, have []metav1.OwnerReference, patch PatchFunc) {
	ref := o.Ref(ctx)
	if Has(have, ref) {
		return
	}
	data, err := patchOf(ref)
	if err == nil {
		err = patch(ctx, data)
	}
	if err != nil && ctx.Err() == nil {
		o.log.Warn("cannot add the owner to "+what+": removing the installation leaves it behind",
			"serviceAccount", o.namespace+"/"+o.name, "err", err)
	}
}

// patchOf is the strategic merge patch that adds ref to an object's
// owners (merged by UID).
func patchOf(ref *metav1.OwnerReference) ([]byte, error) {
	type meta struct {
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	}
	data, err := json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{[]metav1.OwnerReference{*ref}}})
	if err != nil {
		return nil, fmt.Errorf("encode the owner patch: %w", err)
	}
	return data, nil
}
