// Package agentcert holds the one rule for which agent certificates a
// Cluster accepts, and the two API calls that apply it: confirming a
// certificate against the Cluster the API server has now, and retiring the
// certificate a rotation renewed once the agent uses the new one.
//
// The hub records, on each Cluster, the serial of the last certificate it
// issued (a join, `certs issue` or a rotation) and, during a rotation, the
// one renewed; any other certificate of the cluster is superseded. A
// Cluster without a recorded serial (made by hand, or re-created after a
// delete) accepts no certificate at all: old certificates of its name stay
// revoked.
package agentcert

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

// Allowed says whether certificate serial may serve c: nil unless c is
// being deleted (which revokes its certificates), records no certificate,
// or serial is neither the certificate the hub last issued for it nor,
// during a rotation, the one renewed.
func Allowed(c *v1alpha1.Cluster, serial *big.Int) error {
	if c.DeletionTimestamp != nil {
		return fmt.Errorf("cluster %s is being deleted: its agent certificates are revoked", c.Name)
	}
	recorded := c.Annotations[v1alpha1.AnnotationAgentCertificateSerial]
	if recorded == "" {
		return fmt.Errorf("cluster %s records no agent certificate (annotation %s; it was created by hand, or again after a delete, which revoked its certificates): "+
			"it accepts none. Give its agent a certificate with flotilla-hub certs issue --cluster %s on the hub, or join it with a token (flotilla token create --cluster %s)",
			c.Name, v1alpha1.AnnotationAgentCertificateSerial, c.Name, c.Name)
	}
	// A rotation's previous certificate stays acceptable until the agent's
	// first session with the new one (RetirePrevious).
	if recorded != serial.Text(16) && c.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] != serial.Text(16) {
		return fmt.Errorf("certificate %s of cluster %s is superseded by %s (a newer join or rotation); join again with a bootstrap token", serial.Text(16), c.Name, recorded)
	}
	return nil
}

// Confirm applies Allowed to the Cluster the API server has now, never to
// a cached copy: a session is cut only if that refuses it too.
func Confirm(ctx context.Context, clusters flotillav1alpha1.ClusterInterface, cluster string, serial *big.Int) error {
	c, err := clusters.Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %s is not registered (it never joined, or it was deleted, which revokes its certificates): join it with a bootstrap token (flotilla token create)", cluster)
	}
	if err != nil {
		return fmt.Errorf("check the certificate of cluster %s: %w", cluster, err)
	}
	return Allowed(c, serial)
}

// Current says whether c records serial as its only certificate: nothing
// is left to retire (RetirePrevious would change nothing).
func Current(c *v1alpha1.Cluster, serial *big.Int) bool {
	return c.Annotations[v1alpha1.AnnotationAgentCertificateSerial] == serial.Text(16) &&
		c.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] == ""
}

// RetirePrevious refuses cluster's previous certificate from now on if
// serial is its current one, by one conditional patch: the Cluster is
// written only while it still records serial as current.
func RetirePrevious(ctx context.Context, clusters flotillav1alpha1.ClusterInterface, cluster string, serial *big.Int, logger *slog.Logger) error {
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
