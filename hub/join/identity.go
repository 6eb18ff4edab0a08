package join

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// RequestUIDAnnotation on a Cluster is the UID of the join request
	// whose certificate serial it records.
	RequestUIDAnnotation = v1alpha1.AnnotationAgentCertificateRequestUID
	// ReasonIdentityTaken starts the refusal of a join for a cluster that
	// already joined.
	ReasonIdentityTaken = "ClusterIdentityTaken"
	// reasonIdentityRefused denies or fails such a join's request.
	reasonIdentityRefused = "FlotillaClusterIdentityTaken"
	// EventCertificateReplaced on a Cluster: a --replace token superseded
	// its agent certificate.
	EventCertificateReplaced = "AgentCertificateReplaced"
)

// identityRefusal says why a join of cluster with token t may not take
// serial from existing (nil: no such Cluster), or "" when it may: a
// cluster that already holds a certificate is joined again only with a
// token made with --replace for exactly that name, or by a retry of the
// very request (requestUID) that recorded its serial.
func identityRefusal(existing *v1alpha1.Cluster, cluster string, t bootstraptoken.Token, requestUID types.UID) string {
	if existing == nil {
		return ""
	}
	switch {
	case existing.Annotations[v1alpha1.AnnotationAgentCertificateSerial] == "":
		return ""
	case requestUID != "" && existing.Annotations[RequestUIDAnnotation] == string(requestUID):
		return ""
	case t.Replace && t.Cluster == cluster:
		return ""
	}
	return fmt.Sprintf("%s: cluster %q already joined (its agent holds a certificate the hub issued), and a join cannot take over a cluster's identity. "+
		"To re-install that cluster's agent, create a token with `flotilla token create --cluster %s --replace`, or delete the Cluster first", ReasonIdentityTaken, cluster, cluster)
}

// identityTaken is a join refused by identityRefusal.
type identityTaken struct{ msg string }

func (e *identityTaken) Error() string { return e.msg }

// checkIdentity reads Cluster cluster and says why a join with t may not
// take it ("" if it may).
func (c *Controller) checkIdentity(ctx context.Context, cluster string, t bootstraptoken.Token) (string, error) {
	existing, err := c.flotilla.FlotillaV1alpha1().Clusters().Get(ctx, cluster, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read cluster %s: %w", cluster, err)
	}
	return identityRefusal(existing, cluster, t, ""), nil
}

// pickUp answers a join whose request the hub has already signed (the
// agent lost the answer, or joins again once an operator approved it)
// with that certificate, for the single-use token is gone by then. The
// request's name is the cluster's and the key's, and its certificate is
// of use only to the holder of that key.
func (c *Controller) pickUp(req *protocol.JoinRequest) protocol.Message {
	x509req, err := checkRequest(req.CSR, req.ClusterName)
	if err != nil {
		return nil
	}
	csr, err := c.lister.Get(requestName(req.ClusterName, x509req))
	if err != nil || renewal(csr) || len(csr.Status.Certificate) == 0 || csr.Labels[ClusterLabel] != req.ClusterName ||
		csr.Annotations[TokenAnnotation] != bootstraptoken.IDOf(req.BootstrapToken) {
		return nil
	}
	return &protocol.JoinResponse{Certificate: csr.Status.Certificate, CACertificate: c.cfg.CA.CertPEM()}
}

// recordJoin records the serial of a join's certificate about to be
// issued: it marks the request's token used, then records the serial
// unless the cluster already joined and the token may not replace it;
// a refused request is marked Failed and gives errFailed. A replaced
// certificate is an event on the Cluster and a warning in the log.
func (c *Controller) recordJoin(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, cluster string, serial *big.Int) (*joinRecord, error) {
	tok, found, err := bootstraptoken.Claim(ctx, c.kube.CoreV1(), csr.Annotations[TokenAnnotation], csr.Name)
	if r, ok := bootstraptoken.Refused(err); ok {
		return nil, c.failed(ctx, csr, r.Error())
	}
	if err != nil {
		return nil, err
	}
	admit := func(existing *v1alpha1.Cluster) error {
		if msg := identityRefusal(existing, cluster, tok, csr.UID); msg != "" {
			return &identityTaken{msg}
		}
		return nil
	}
	reg := registration(csr)
	recorded, replaced, err := recordSerial(ctx, c.flotilla, cluster, serial, reg, csr.UID, admit)
	var taken *identityTaken
	if errors.As(err, &taken) {
		return nil, c.failed(ctx, csr, taken.Error())
	}
	if err != nil {
		return nil, err
	}
	if replaced != "" {
		c.replaced(recorded, csr, tok.ID, replaced, serial)
	}
	if len(reg.Ignored) > 0 {
		c.ignored(recorded, csr, tok.ID, reg)
	}
	return &joinRecord{token: tok, found: found}, nil
}

// joinRecord is the token a recorded join used.
type joinRecord struct {
	token bootstraptoken.Token
	found bool // the token still existed
}

// replaced records that a --replace token superseded old with serial.
func (c *Controller) replaced(cl *v1alpha1.Cluster, csr *certificatesv1.CertificateSigningRequest, tokenID, old string, serial *big.Int) {
	msg := fmt.Sprintf("bootstrap token %s, made with --replace for this cluster, joined it: agent certificate %s replaces %s, whose sessions are refused from now on (certificate request %s)",
		tokenID, serial.Text(16), old, csr.Name)
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindCluster, Name: cl.Name, UID: cl.UID}
	c.recorder().Event(ref, corev1.EventTypeWarning, EventCertificateReplaced, msg)
	c.logger.Warn("agent certificate replaced by a --replace join", "cluster", cl.Name, "token", tokenID, "serial", serial.Text(16), "replaced", old, "request", csr.Name)
}

// consume deletes the single-use token of a join whose certificate is
// issued. A failure leaves it marked used, which refuses it anyway.
func (c *Controller) consume(ctx context.Context, j *joinRecord) {
	if j == nil || !j.found {
		return
	}
	if err := bootstraptoken.Consume(ctx, c.kube.CoreV1(), j.token); err != nil {
		c.logger.Warn("a used bootstrap token stays (marked used, it joins nothing)", "token", j.token.ID, "err", err)
	}
}
