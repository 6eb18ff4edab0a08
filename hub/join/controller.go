package join

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/internal/pki"
)

// Approval modes (--agent-csr-approval).
const (
	ApprovalAuto   = "auto"
	ApprovalManual = "manual"
)

// Reasons on the requests' conditions.
const (
	reasonAutoApproved   = "FlotillaBootstrapTokenValid"
	reasonTokenRefused   = "FlotillaBootstrapTokenRefused"
	reasonRequestRefused = "FlotillaRequestRefused"
	// ReasonNotCreatedByHub fails a request someone else created.
	ReasonNotCreatedByHub = "FlotillaRequestNotCreatedByHub"
)

// Config says how agent certificates are approved and signed.
type Config struct {
	// CA is the hub CA, which agents pin: joins and renewals send it.
	CA *pki.CA
	// AgentCA signs the agents' certificates.
	AgentCA *pki.CA
	// HubUser is the user the hub's own clients authenticate as to its
	// API (spec.username of the requests it creates): requests of any
	// other creator are failed, never approved nor signed.
	HubUser string
	// CertTTL is the lifetime of an agent certificate (--agent-cert-ttl).
	CertTTL time.Duration
	// Approval is ApprovalAuto or ApprovalManual.
	Approval string
	// Wait is how long a join waits for its certificate before it answers
	// Pending.
	Wait time.Duration
	// Retention is how long a signed, denied or failed request is kept
	// (0: DefaultRetention).
	Retention time.Duration
	// Recorder records events on Clusters (nil: none).
	Recorder controller.Recorder
}

// Controller approves and signs the agents' CertificateSigningRequests
// (signer flotilla.io/agent), and lets joins wait for theirs.
type Controller struct {
	kube     kubernetes.Interface
	flotilla flotillaclient.Interface
	cfg      Config
	clock    clock.PassiveClock
	logger   *slog.Logger

	factory informers.SharedInformerFactory
	lister  certificateslisters.CertificateSigningRequestLister
	synced  cache.InformerSynced
	queue   *controller.Queue
	guard   *guard // failed joins
	counts  signerCounts

	mu      sync.Mutex
	waiters map[string][]chan struct{} // by request name: closed on any change
	// watching: Watch started the informers, for as long as its context.
	watching atomic.Bool
}

// New builds the controller; Run starts its watch of the requests of
// SignerName (the only watch of CertificateSigningRequests in the hub).
func New(clients *kube.Clients, cfg Config, clk clock.WithTicker, logger *slog.Logger) *Controller {
	factory := informers.NewSharedInformerFactoryWithOptions(clients.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", SignerName).String()
	}))
	inf := factory.Certificates().V1().CertificateSigningRequests()
	c := &Controller{
		kube: clients.Kube, flotilla: clients.Flotilla, cfg: cfg, clock: clk, logger: logger.With("controller", "join"),
		factory: factory, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		waiters: map[string][]chan struct{}{}, guard: newGuard(),
	}
	c.queue = controller.NewQueueWithClock("join", c.reconcile, logger, clk)
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.changed(obj) },
		UpdateFunc: func(_, obj any) { c.changed(obj) },
		DeleteFunc: func(obj any) { c.changed(obj) },
	})
	return c
}

// recorder is Config.Recorder, or one that drops events.
func (c *Controller) recorder() controller.Recorder {
	if c.cfg.Recorder == nil {
		return controller.DiscardRecorder{}
	}
	return c.cfg.Recorder
}

// changed queues a request and wakes the joins waiting for it.
func (c *Controller) changed(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.queue.Add(key)
	c.mu.Lock()
	for _, ch := range c.waiters[key] {
		close(ch)
	}
	delete(c.waiters, key)
	c.mu.Unlock()
}

// Run watches and reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	if !c.watching.Load() {
		// Watch's context, not this one, ends a watch it started:
		// Shutdown would wait for it.
		defer c.factory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	c.queue.Run(ctx, workers)
}

// Watch starts the watch of the requests without reconciling them, so
// that joins and renewals served here wait for the requests the leader
// approves and signs (its Run reconciles); Run may follow on the same
// controller.
func (c *Controller) Watch(ctx context.Context) {
	c.watching.Store(true)
	c.factory.Start(ctx.Done())
}

// changeOf returns a channel closed at the next change of request name.
func (c *Controller) changeOf(name string) <-chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.waiters[name] = append(c.waiters[name], ch)
	c.mu.Unlock()
	return ch
}

// reconcile approves (or denies) and signs one request.
func (c *Controller) reconcile(ctx context.Context, name string) error {
	csr, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != SignerName {
		return nil
	}
	if gone, err := c.collect(ctx, csr); gone || err != nil {
		return err
	}
	if finished(csr) || len(csr.Status.Certificate) > 0 {
		return nil
	}
	if csr.Spec.Username != c.cfg.HubUser {
		return c.refuseCreator(ctx, csr)
	}
	if !approved(csr) {
		if renewal(csr) {
			return c.approveRenewal(ctx, csr) // in both modes (renew.go)
		}
		if c.cfg.Approval != ApprovalAuto {
			return nil // an operator decides: kubectl certificate approve|deny
		}
		return c.decide(ctx, csr)
	}
	return c.sign(ctx, csr)
}

// decide approves a request whose token is still good for its cluster and
// denies one whose token is not: the agent learns why at once.
func (c *Controller) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	cluster := csr.Labels[ClusterLabel]
	condition := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reasonAutoApproved,
		Message: fmt.Sprintf("bootstrap token %s is valid for cluster %s", csr.Annotations[TokenAnnotation], cluster),
	}
	if reason, msg := c.checkToken(ctx, csr, cluster); reason != "" {
		condition = certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: reason, Message: msg,
		}
	}
	return c.setApproval(ctx, csr, condition, "request")
}

// setApproval writes condition (Approved or Denied) through the approval
// subresource and logs it; what names the kind of request in the log.
func (c *Controller) setApproval(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, condition certificatesv1.CertificateSigningRequestCondition, what string) error {
	condition.LastUpdateTime = metav1.NewTime(c.clock.Now())
	update := csr.DeepCopy()
	update.Status.Conditions = append(update.Status.Conditions, condition)
	if _, err := c.kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, update, metav1.UpdateOptions{FieldManager: controller.FieldManager}); err != nil {
		return fmt.Errorf("%s certificate %s %s: %w", condition.Type, what, csr.Name, err)
	}
	c.logger.Info("agent certificate "+what+" "+string(condition.Type), "request", csr.Name, "cluster", csr.Labels[ClusterLabel], "reason", condition.Reason, "message", condition.Message)
	return nil
}

// checkToken returns why a request may not be approved automatically, or
// "" when its token (by ID: the join proved the secret) still exists, is
// unexpired, unused, meant for joining and bound to this cluster or none,
// and the cluster has not joined yet unless the token may replace it.
func (c *Controller) checkToken(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, cluster string) (reason, message string) {
	if _, err := checkRequest(csr.Spec.Request, cluster); err != nil {
		return reasonRequestRefused, err.Error()
	}
	tok, err := bootstraptoken.Check(ctx, c.kube.CoreV1(), csr.Annotations[TokenAnnotation], cluster, c.clock.Now())
	if r, ok := bootstraptoken.Refused(err); ok {
		return reasonTokenRefused, r.Message
	}
	if err != nil {
		return reasonTokenRefused, "the hub could not read the bootstrap token: " + err.Error()
	}
	taken, err := c.checkIdentity(ctx, cluster, tok)
	if err != nil {
		return reasonIdentityRefused, "the hub could not read the cluster: " + err.Error()
	}
	if taken != "" {
		return reasonIdentityRefused, taken
	}
	return "", ""
}

func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(csr, certificatesv1.CertificateApproved)
}

// finished: denied or failed, nothing more to do.
func finished(csr *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(csr, certificatesv1.CertificateDenied) || hasCondition(csr, certificatesv1.CertificateFailed)
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
