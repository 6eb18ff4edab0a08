package registry

import (
	"context"
	"math/big"

	"github.com/flotilla-io/flotilla/hub/agentcert"
)

// CheckCertificate refuses a session of a cluster that is not registered
// (it never joined, or its Cluster was deleted: deleting a Cluster revokes
// its certificates), of a cluster being deleted, and one whose certificate
// (serial) is not the last the hub issued for it, when the hub recorded
// one (a join or certs issue does). Nil means the session may go on.
func (r *Registry) CheckCertificate(ctx context.Context, cluster string, serial *big.Int) error {
	r.mu.Lock()
	e, known := r.entries[cluster]
	ok := known && agentcert.Allowed(e.obj, serial) == nil
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
	return agentcert.Confirm(ctx, r.clusters, cluster, serial)
}

// CertificateInUse notes that a session of cluster uses certificate serial:
// if it is the cluster's current certificate, the one a rotation renewed
// (AnnotationAgentCertificatePreviousSerial) is refused from now on. The
// Cluster is written once, only while it still records serial as current.
func (r *Registry) CertificateInUse(ctx context.Context, cluster string, serial *big.Int) error {
	r.mu.Lock()
	e, known := r.entries[cluster]
	done := known && agentcert.Current(e.obj, serial)
	r.mu.Unlock()
	if done {
		return nil // nothing to clear (the informer may lag: then the patch decides)
	}
	return agentcert.RetirePrevious(ctx, r.clusters, cluster, serial, r.logger)
}
