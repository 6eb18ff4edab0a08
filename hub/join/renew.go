package join

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// RenewalOfAnnotation on a CertificateSigningRequest marks a renewal
	// over an authenticated session: the serial, in hex, of the certificate
	// the agent proved its identity with. A renewal has no bootstrap token.
	RenewalOfAnnotation = "flotilla.io/renewal-of"
	// reasonRenewal approves a renewal, in both approval modes.
	reasonRenewal = "FlotillaRenewalAuthenticated"
	// maxRenewInterval is the least time between two renewals of a cluster
	// (shorter for certificates shorter than four times that: a quarter of
	// their lifetime, so the renewal at 80 % is never refused).
	maxRenewInterval = time.Minute
)

// errFailed: the hub will not sign the request (a renewal's certificate
// is no longer the cluster's, or a join may not take the cluster); it
// was marked Failed.
var errFailed = errors.New("request failed")

// renewal reports whether csr is a renewal, not a join.
func renewal(csr *certificatesv1.CertificateSigningRequest) bool {
	_, ok := csr.Annotations[RenewalOfAnnotation]
	return ok
}

// requestSeconds is the expirationSeconds of a request for a certificate
// of ttl: the API server wants at least 10 minutes; the hub signs for ttl
// (the shorter of the two), which may be as short as a minute for tests.
func requestSeconds(ttl time.Duration) int32 {
	return int32(max(ttl, 10*time.Minute) / time.Second)
}

// renewInterval is the least time between two renewals of a cluster.
func (c *Controller) renewInterval() time.Duration {
	return min(maxRenewInterval, c.cfg.CertTTL/4)
}

// Renew answers an agent's renewal request on its session: cluster is the
// session's cluster, oldSerial the serial of the certificate it connected
// with, csrPEM the request for its new key, acceptsAgentCA whether the
// agent takes a certificate of the agent CA (IssuerAnnotation). The answer is a
// CertificateRenewResponse or an Error (CSRRefused, CSRDenied,
// RateLimited, Unavailable); an error only when the hub itself failed.
// The caller allows one renewal at a time per session.
func (c *Controller) Renew(ctx context.Context, cluster string, oldSerial *big.Int, csrPEM []byte, acceptsAgentCA bool) (protocol.Message, error) {
	req, err := checkRequest(csrPEM, cluster)
	if err != nil {
		return &protocol.Error{Code: protocol.CodeCSRRefused, Message: err.Error()}, nil
	}
	if last, ok := c.lastRenewal(cluster); ok {
		if next := last.Add(c.renewInterval()); c.clock.Now().Before(next) {
			return &protocol.Error{Code: protocol.CodeRateLimited, Message: fmt.Sprintf(
				"cluster %s renewed its certificate at %s: renew again after %s", cluster,
				last.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339))}, nil
		}
	}
	csr := markIssuer(newRenewalRequest(cluster, req, oldSerial, requestSeconds(c.cfg.CertTTL)), acceptsAgentCA)
	changed := c.changeOf(csr.Name) // before creating, so no change is missed
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{FieldManager: controller.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create certificate request %s: %w", csr.Name, err)
	}
	answer, err := c.await(ctx, csr.Name, changed)
	if err != nil {
		return nil, err
	}
	switch a := answer.(type) {
	case *protocol.JoinResponse:
		if a.Pending {
			return &protocol.Error{Code: protocol.CodeUnavailable, Message: fmt.Sprintf("certificate request %s is not signed yet: renew again later", csr.Name)}, nil
		}
		return &protocol.CertificateRenewResponse{Certificate: a.Certificate, CACertificate: a.CACertificate}, nil
	}
	return answer, nil
}

// lastRenewal is when the newest renewal request of cluster was made.
func (c *Controller) lastRenewal(cluster string) (time.Time, bool) {
	csrs, err := c.lister.List(labels.SelectorFromSet(labels.Set{ClusterLabel: cluster}))
	if err != nil {
		return time.Time{}, false
	}
	var last time.Time
	for _, csr := range csrs {
		if renewal(csr) && csr.CreationTimestamp.After(last) {
			last = csr.CreationTimestamp.Time
		}
	}
	return last, !last.IsZero()
}

// newRenewalRequest is the CertificateSigningRequest of a renewal.
func newRenewalRequest(cluster string, req *x509.CertificateRequest, oldSerial *big.Int, ttlSeconds int32) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name:        requestName(cluster, req),
			Labels:      map[string]string{ClusterLabel: cluster},
			Annotations: map[string]string{RenewalOfAnnotation: oldSerial.Text(16)},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req.Raw}),
			SignerName:        SignerName,
			ExpirationSeconds: &ttlSeconds,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

// approveRenewal approves a renewal whatever the approval mode: the agent
// proved the identity with its current certificate, which a join or
// `certs issue` would have superseded.
func (c *Controller) approveRenewal(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	cluster := csr.Labels[ClusterLabel]
	condition := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reasonRenewal,
		Message: fmt.Sprintf("renewal: cluster %s proved its identity over its session with its current certificate (serial %s)", cluster, csr.Annotations[RenewalOfAnnotation]),
	}
	if _, err := checkRequest(csr.Spec.Request, cluster); err != nil {
		condition = certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: reasonRequestRefused, Message: err.Error(),
		}
	}
	return c.setApproval(ctx, csr, condition, "renewal")
}

// record notes the serial of a certificate about to be issued: for a
// renewal, keeping the renewed one acceptable; for a join, alone
// (recordJoin), returning the token it used. A request the hub will not
// sign is marked Failed and gives errFailed.
func (c *Controller) record(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, cluster string, serial *big.Int) (*joinRecord, error) {
	if !renewal(csr) {
		return c.recordJoin(ctx, csr, cluster, serial)
	}
	err := recordRenewal(ctx, c.flotilla, cluster, serial, csr.Annotations[RenewalOfAnnotation])
	var refused *renewalRefused
	if errors.As(err, &refused) {
		return nil, c.failed(ctx, csr, refused.Error())
	}
	return nil, err
}

// renewalRefused: the renewed certificate is not the cluster's any more.
type renewalRefused struct{ msg string }

func (e *renewalRefused) Error() string { return e.msg }

// recordRenewal records serial as cluster's certificate and old, the
// certificate it renews, as the previous one, which stays acceptable until
// the agent's first session with the new one. old must be the cluster's
// current or previous certificate.
func recordRenewal(ctx context.Context, client flotillaclient.Interface, cluster string, serial *big.Int, old string) error {
	clusters := client.FlotillaV1alpha1().Clusters()
	hex := serial.Text(16)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := clusters.Get(ctx, cluster, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &renewalRefused{fmt.Sprintf("cluster %s is not registered: its certificates are revoked", cluster)}
		}
		if err != nil {
			return err
		}
		if existing.DeletionTimestamp != nil {
			return &renewalRefused{fmt.Sprintf("cluster %s is being deleted: its certificates are revoked", cluster)}
		}
		current, previous := existing.Annotations[v1alpha1.AnnotationAgentCertificateSerial], existing.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial]
		if current == hex && previous == old {
			return nil
		}
		if current != "" && old != current && old != previous {
			return &renewalRefused{fmt.Sprintf("certificate %s of cluster %s was superseded by %s (a newer join or rotation): not renewed", old, cluster, current)}
		}
		update := existing.DeepCopy()
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[v1alpha1.AnnotationAgentCertificateSerial] = hex
		update.Annotations[v1alpha1.AnnotationAgentCertificatePreviousSerial] = old
		_, err = clusters.Update(ctx, update, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		return err
	})
	var refused *renewalRefused
	if err != nil && !errors.As(err, &refused) {
		return fmt.Errorf("record the renewed certificate serial of cluster %s: %w", cluster, err)
	}
	return err
}
