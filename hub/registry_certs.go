package hub

import (
	"context"
	"fmt"
	"math/big"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// CheckCertificate refuses a session of cluster whose certificate (serial)
// is not the last the hub issued for it, when the hub recorded one (a join
// or certs issue does), and any session of a cluster being deleted. Nil
// means the session may go on.
func (r *Registry) CheckCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	r.mu.Lock()
	e, known := r.entries[cluster]
	ok := !known || certificateAllowed(e.obj, serial) == nil
	r.mu.Unlock()
	if ok {
		return nil
	}
	// The informer may not have the latest join or rotation yet: the API
	// server decides.
	c, err := r.clusters.Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check the certificate of cluster %s: %w", cluster, err)
	}
	return certificateAllowed(c, serial)
}

// certificateAllowed is CheckCertificate's rule for one version of c.
func certificateAllowed(c *v1alpha1.Cluster, serial *big.Int) error {
	if c.DeletionTimestamp != nil {
		return fmt.Errorf("cluster %s is being deleted: its agent certificates are revoked", c.Name)
	}
	if recorded := c.Annotations[v1alpha1.AnnotationAgentCertificateSerial]; recorded != "" && recorded != serial.Text(16) {
		return fmt.Errorf("certificate %s of cluster %s is superseded by %s (a newer join or rotation); join again with a bootstrap token", serial.Text(16), c.Name, recorded)
	}
	return nil
}
