package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flotillav1alpha1 "github.com/flotilla-io/flotilla/api/client/clientset/versioned/typed/api/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
)

// CheckCertificate refuses a session of a cluster that is not registered
// (it never joined, or its Cluster was deleted: deleting a Cluster revokes
// its certificates), of a cluster being deleted, and one whose certificate
// (serial) is not the last the hub issued for it, when the hub recorded
// one (a join or certs issue does). Nil means the session may go on.
func (r *Registry) CheckCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	r.mu.Lock()
	e, known := r.entries[cluster]
	ok := known && certificateAllowed(e.obj, serial) == nil
	r.mu.Unlock()
	if ok {
		return nil
	}
	// The informer may not have the latest join or rotation yet: the API
	// server decides.
	return r.ConfirmCertificate(ctx, cluster, serial)
}

// ConfirmCertificate is CheckCertificate's rule applied to the Cluster the
// API server has now, never to memory: a session is cut only if that
// refuses it too.
func (r *Registry) ConfirmCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	return confirmCertificate(ctx, r.clusters, cluster, serial)
}

// confirmCertificate applies certificateAllowed to the Cluster the API
// server has now.
func confirmCertificate(ctx context.Context, clusters flotillav1alpha1.ClusterInterface, cluster string, serial *big.Int) error {
	c, err := clusters.Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %s is not registered (it never joined, or it was deleted, which revokes its certificates): join it with a bootstrap token (flotilla token create)", cluster)
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
	// A rotation's previous certificate stays acceptable until the agent's
	// first session with the new one (CertificateInUse).
	if recorded := c.Annotations[v1alpha1.AnnotationAgentCertificateSerial]; recorded != "" && recorded != serial.Text(16) &&
		c.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] != serial.Text(16) {
		return fmt.Errorf("certificate %s of cluster %s is superseded by %s (a newer join or rotation); join again with a bootstrap token", serial.Text(16), c.Name, recorded)
	}
	return nil
}

// CertificateInUse notes that a session of cluster uses certificate serial:
// if it is the cluster's current certificate, the one a rotation renewed
// (AnnotationAgentCertificatePreviousSerial) is refused from now on. The
// Cluster is written once, only while it still records serial as current.
func (r *Registry) CertificateInUse(ctx context.Context, cluster string, serial *big.Int) error {
	hex := serial.Text(16)
	r.mu.Lock()
	e, known := r.entries[cluster]
	done := known && e.obj.Annotations[v1alpha1.AnnotationAgentCertificateSerial] == hex &&
		e.obj.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] == ""
	r.mu.Unlock()
	if done {
		return nil // nothing to clear (the informer may lag: then the patch decides)
	}
	return retirePreviousCertificate(ctx, r.clusters, cluster, serial, r.logger)
}

// retirePreviousCertificate refuses cluster's previous certificate from
// now on if serial is its current one, by one conditional patch.
func retirePreviousCertificate(ctx context.Context, clusters flotillav1alpha1.ClusterInterface, cluster string, serial *big.Int, logger *slog.Logger) error {
	hex := serial.Text(16)
	patch, err := json.Marshal([]map[string]string{
		{"op": "test", "path": annotationPath(v1alpha1.AnnotationAgentCertificateSerial), "value": hex},
		{"op": "remove", "path": annotationPath(v1alpha1.AnnotationAgentCertificatePreviousSerial)},
	})
	if err != nil {
		return err
	}
	_, err = clusters.Patch(ctx, cluster, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: controller.FieldManager})
	switch {
	case err == nil:
		logger.Info("agent uses its renewed certificate: the previous one is refused from now on", "cluster", cluster, "serial", hex)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err):
		return nil // not current, or no previous certificate: nothing to clear
	}
	return fmt.Errorf("clear the previous certificate serial of cluster %s: %w", cluster, err)
}

// annotationPath is the JSON pointer of an annotation.
func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
