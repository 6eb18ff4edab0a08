package join

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/protocol"
)

// sign issues the certificate of an approved request: the serial is
// recorded on the Cluster first, so the hub knows every certificate that
// exists; a request it must not sign is marked Failed.
func (c *Controller) sign(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	cluster := csr.Labels[ClusterLabel]
	req, err := checkRequest(csr.Spec.Request, cluster)
	if err != nil {
		return c.fail(ctx, csr, err.Error())
	}
	ttl := c.cfg.CertTTL
	if s := csr.Spec.ExpirationSeconds; s != nil && time.Duration(*s)*time.Second < ttl {
		ttl = time.Duration(*s) * time.Second
	}
	ca, chain := c.issuer(csr)
	certPEM, serial, err := ca.SignClient(req.PublicKey, protocol.ClusterCommonName(cluster), ttl, c.clock.Now())
	if err != nil {
		return c.fail(ctx, csr, err.Error())
	}
	joined, err := c.record(ctx, csr, cluster, serial)
	if err != nil {
		if errors.Is(err, errFailed) {
			return nil // marked Failed
		}
		return err
	}
	update := csr.DeepCopy()
	// The agent CA follows: the agent trusts the hub CA only, and takes
	// the agent CA from the hub's answer (see agent.issuerPools).
	update.Status.Certificate = certPEM
	if chain {
		update.Status.Certificate = append(certPEM, ca.CertPEM()...)
	} else {
		c.counts.hubCAIssued.Add(1)
		c.logger.Warn("agent certificate signed by the hub CA: the agent is older than the agent CA, and this certificate also authenticates to the hub's Kubernetes API (as a user no role grants anything); upgrade the agent",
			"request", csr.Name, "cluster", cluster)
	}
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: controller.FieldManager}); err != nil {
		return fmt.Errorf("store the certificate of request %s: %w", csr.Name, err)
	}
	c.logger.Info("agent certificate issued", "request", csr.Name, "cluster", cluster, "serial", serial.Text(16), "validFor", ttl)
	c.consume(ctx, joined)
	return nil
}

// fail marks a request the hub will not sign.
func (c *Controller) fail(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	if err := c.failWith(ctx, csr, reasonRequestRefused, message); err != nil {
		return err
	}
	c.logger.Warn("agent certificate request failed", "request", csr.Name, "cluster", csr.Labels[ClusterLabel], "reason", message)
	return nil
}

// refuseCreator fails a request the hub did not create, whoever created
// it and whatever it says (a renewal, a join, approved by an operator):
// the hub signs only what it created after proving the agent's identity,
// by a session with its current certificate or by a bootstrap token. A
// Warning event on the request and a warning in the log say who made it.
func (c *Controller) refuseCreator(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	msg := fmt.Sprintf("certificate request %s for signer %s was created by user %q, not by the hub (%s): the hub signs only the requests it creates itself, "+
		"for an agent that joins with a bootstrap token or renews over its session. To add a cluster, create a token (flotilla token create) and start its agent with it",
		csr.Name, SignerName, csr.Spec.Username, c.cfg.HubUser)
	ref := corev1.ObjectReference{APIVersion: certificatesv1.SchemeGroupVersion.String(), Kind: "CertificateSigningRequest", Name: csr.Name, UID: csr.UID}
	c.recorder().Event(ref, corev1.EventTypeWarning, ReasonNotCreatedByHub, msg)
	c.counts.notCreatedByHub.Add(1)
	c.logger.Warn("agent certificate request not created by the hub: failed, not signed", "request", csr.Name,
		"cluster", csr.Labels[ClusterLabel], "creator", csr.Spec.Username, "renewalOf", csr.Annotations[RenewalOfAnnotation])
	return c.failWith(ctx, csr, ReasonNotCreatedByHub, msg)
}

// failWith marks a request the hub will not sign, for reason.
func (c *Controller) failWith(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, reason, message string) error {
	update := csr.DeepCopy()
	update.Status.Conditions = append(update.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: reason,
		Message: message, LastUpdateTime: metav1.NewTime(c.clock.Now()),
	})
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: controller.FieldManager}); err != nil {
		return fmt.Errorf("mark request %s failed: %w", csr.Name, err)
	}
	return nil
}

// failed marks a request the hub will not sign and gives errFailed.
func (c *Controller) failed(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, message string) error {
	if err := c.fail(ctx, csr, message); err != nil {
		return err
	}
	return errFailed
}

// RecordSerial notes serial as the cluster's current agent certificate,
// registering the Cluster with reg (an existing one gets what reg sets):
// sessions with any other certificate of the cluster are refused from then
// on. It is the operator's `certs issue`, which replaces whatever
// certificate the cluster had.
func RecordSerial(ctx context.Context, client flotillaclient.Interface, cluster string, serial *big.Int, reg Registration) error {
	_, _, err := recordSerial(ctx, client, cluster, serial, reg, "", nil)
	return err
}

// recordSerial is RecordSerial for join request requestUID (empty: none),
// if admit (nil: always) lets the Cluster as it is take serial; admit's
// error is returned as it is. It returns the Cluster as recorded and the
// serial it replaced ("" if none, or if an earlier attempt of the same
// request replaced it).
func recordSerial(ctx context.Context, client flotillaclient.Interface, cluster string, serial *big.Int, reg Registration,
	requestUID types.UID, admit func(*v1alpha1.Cluster) error) (*v1alpha1.Cluster, string, error) {
	clusters := client.FlotillaV1alpha1().Clusters()
	hex := serial.Text(16)
	var recorded *v1alpha1.Cluster
	var replaced string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := clusters.Get(ctx, cluster, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			recorded, err = clusters.Create(ctx, newCluster(cluster, hex, requestUID, reg), metav1.CreateOptions{FieldManager: controller.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(v1alpha1.Resource("clusters"), cluster, err) // created meanwhile: update it
			}
			return err
		}
		if err != nil {
			return err
		}
		if existing.DeletionTimestamp != nil {
			return fmt.Errorf("cluster %s is being deleted: join again once it is gone", cluster)
		}
		if admit != nil {
			if err := admit(existing); err != nil {
				return err
			}
		}
		recorded, replaced = existing, replacedSerial(existing, hex, requestUID)
		update := withRegistration(existing, reg)
		if existing.Annotations[v1alpha1.AnnotationAgentCertificateSerial] == hex && existing.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] == "" &&
			equality.Semantic.DeepEqual(existing.Labels, update.Labels) && equality.Semantic.DeepEqual(existing.Spec, update.Spec) {
			return nil
		}
		recorded, err = clusters.Update(ctx, withSerial(update, hex, requestUID), metav1.UpdateOptions{FieldManager: controller.FieldManager})
		return err
	})
	if err != nil {
		var taken *identityTaken
		if errors.As(err, &taken) {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("record the certificate serial of cluster %s: %w", cluster, err)
	}
	return recorded, replaced, nil
}

// replacedSerial is the certificate serial that recording hex for join
// request requestUID supersedes: "" when there is none, or when the
// same request recorded it.
func replacedSerial(existing *v1alpha1.Cluster, hex string, requestUID types.UID) string {
	old := existing.Annotations[v1alpha1.AnnotationAgentCertificateSerial]
	if old == hex || (requestUID != "" && existing.Annotations[RequestUIDAnnotation] == string(requestUID)) {
		return ""
	}
	return old
}

// withSerial is existing recording hex, issued for join request
// requestUID (empty: none), as its only certificate.
func withSerial(existing *v1alpha1.Cluster, hex string, requestUID types.UID) *v1alpha1.Cluster {
	update := existing.DeepCopy()
	if update.Annotations == nil {
		update.Annotations = map[string]string{}
	}
	update.Annotations[v1alpha1.AnnotationAgentCertificateSerial] = hex
	delete(update.Annotations, v1alpha1.AnnotationAgentCertificatePreviousSerial) // a join supersedes a rotation's previous certificate too
	delete(update.Annotations, RequestUIDAnnotation)
	if requestUID != "" {
		update.Annotations[RequestUIDAnnotation] = string(requestUID)
	}
	return update
}

// newCluster is a Cluster registered by its join.
func newCluster(name, serial string, requestUID types.UID, reg Registration) *v1alpha1.Cluster {
	annotations := map[string]string{v1alpha1.AnnotationAgentCertificateSerial: serial}
	if requestUID != "" {
		annotations[RequestUIDAnnotation] = string(requestUID)
	}
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: reg.Labels, Annotations: annotations, Finalizers: []string{v1alpha1.ClusterFinalizer}},
		Spec:       v1alpha1.ClusterSpec{Provider: reg.Provider, Region: reg.Region, Zone: reg.Zone},
	}
}
