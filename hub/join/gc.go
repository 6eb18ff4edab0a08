package join

import (
	"context"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// How long requests are kept, as kube-controller-manager's csrcleaner
// keeps them (no controller-manager runs on the hub): a signed, denied or
// failed request for DefaultRetention after its last change, so an agent
// that lost the answer finds it again; one still waiting for approval for
// pendingRetention after its creation.
const (
	DefaultRetention = time.Hour
	pendingRetention = 24 * time.Hour
)

// expiry is when csr may be deleted; false while it is approved and not
// yet signed.
func (c *Controller) expiry(csr *certificatesv1.CertificateSigningRequest) (time.Time, bool) {
	last := csr.CreationTimestamp.Time
	for _, cond := range csr.Status.Conditions {
		if cond.LastUpdateTime.After(last) {
			last = cond.LastUpdateTime.Time
		}
	}
	switch {
	case len(csr.Status.Certificate) > 0 || finished(csr):
		return last.Add(c.retention()), true
	case !approved(csr):
		return csr.CreationTimestamp.Add(pendingRetention), true
	}
	return time.Time{}, false
}

func (c *Controller) retention() time.Duration {
	if c.cfg.Retention > 0 {
		return c.cfg.Retention
	}
	return DefaultRetention
}

// collect deletes csr once it expired (exactly the version seen) and
// reports true; otherwise it wakes the controller at its expiry.
func (c *Controller) collect(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (bool, error) {
	at, ok := c.expiry(csr)
	if !ok {
		return false, nil
	}
	if wait := at.Sub(c.clock.Now()); wait > 0 {
		c.queue.AddAfter(csr.Name, wait)
		return false, nil
	}
	err := c.kube.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &csr.UID, ResourceVersion: &csr.ResourceVersion},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("delete expired certificate request %s: %w", csr.Name, err)
	}
	c.logger.Info("expired agent certificate request deleted", "request", csr.Name, "cluster", csr.Labels[ClusterLabel])
	return true, nil
}
