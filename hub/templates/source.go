// Package templates holds every resource template on the hub in memory,
// whatever its kind: a controller.Source of unstructured objects, keyed by
// names.TemplateKey (GROUP/KIND/NAMESPACE/NAME), that the detector,
// binding and status controllers share.
//
// Templates are the objects the hub's API server stores that nothing runs
// there. Discovery finds the resources that hold them: one version per
// group-resource, the preferred one, that can be listed, watched and got;
// no subresources; not the groups flotilla.io, apps.flotilla.io,
// policy.karmada.io, apps.karmada.io (policies, bindings, Works and
// rebalancers are not templates), events.k8s.io, coordination.k8s.io,
// apiregistration.k8s.io, flowcontrol.apiserver.k8s.io,
// authentication.k8s.io, authorization.k8s.io and certificates.k8s.io, nor
// the core group's events. Each resource gets its own dynamic informer.
// Objects in namespaces named flotilla-* (the hub's) or kube-* (the API
// server's), such Namespaces themselves, and the CustomResourceDefinitions
// of the excluded groups (which the hub installs) are left out.
//
// An object appears in the preferred version of its kind: a template
// written as another version of the same kind (apps/v1beta1, a CRD's older
// version) is read, and propagated, in the preferred one, as the API
// server converts it; its key does not name a version.
//
// CustomResourceDefinitions are watched (an apiextensions informer, without
// their schemas): when one is created, changed or deleted, discovery runs
// again, once the API server's discovery shows the change. A new resource
// (a CRD just Established) gets an informer whose objects handlers hear of
// as added; a resource no longer served (CRD deleted, or no version served)
// has its informer stopped and handlers hear of every object it held as
// deleted; a new preferred version (a CRD serving a higher version) gets a
// new informer that takes over once it has listed, handlers hearing of its
// objects as updates, never as deleted and added again. A group that
// discovery cannot read keeps its informers as they are.
//
// Memory: an informer per resource, over a hub that holds few objects of
// most kinds. On the hub's API server with nothing applied (kube-apiserver
// v1.37.2 with Flotilla's CRDs; test/hubapi), discovery finds 54 resources,
// so 54 informers and watches; they list 133
// templates, nearly all the API server's bootstrap ClusterRoles and
// ClusterRoleBindings. Starting them costs about 6 MiB of heap and 7-8 MiB
// of RSS, and they sync in about 0.2 s on the 2-core development machine
// (TestFootprint). managedFields are dropped from every object held.
package templates

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// Discovery settings.
const (
	// agreePeriod and agreeAttempts bound the wait for the API server's
	// discovery to show a CRD change (it usually takes milliseconds).
	agreePeriod   = 50 * time.Millisecond
	agreeAttempts = 100
	// retryMax bounds the backoff of a discovery that fails.
	retryMax = 10 * time.Second
	// syncTimeout bounds the wait for an informer's first list: a resource
	// that cannot be listed (a CRD whose conversion webhook does not answer
	// on the hub) must not hold every controller back.
	syncTimeout = 30 * time.Second
)

// Source is every template on the hub. It implements
// controller.Source[*unstructured.Unstructured].
type Source struct {
	clients *kube.Clients
	logger  *slog.Logger

	crds       cache.SharedIndexInformer
	crdFactory apiextensionsinformers.SharedInformerFactory

	handlers atomic.Pointer[[]controller.Handler[*unstructured.Unstructured]]
	kick     chan struct{}
	once     sync.Once
	synced   chan struct{}

	mu   sync.RWMutex
	byGR map[schema.GroupResource]*resource
	byGK map[schema.GroupKind]*resource
	// everCRD holds the resources of every CRD seen (the discovery loop's).
	everCRD map[schema.GroupResource]bool
}

// New returns the Source over clients; crds watches
// CustomResourceDefinitions. Add handlers, then Start (or Run).
func New(clients *kube.Clients, crds apiextensionsclient.Interface, logger *slog.Logger) *Source {
	s := &Source{
		clients: clients,
		logger:  logger.With("component", "templates"),
		kick:    make(chan struct{}, 1),
		synced:  make(chan struct{}),
		byGR:    map[schema.GroupResource]*resource{},
		byGK:    map[schema.GroupKind]*resource{},
		everCRD: map[schema.GroupResource]bool{},
	}
	s.handlers.Store(&[]controller.Handler[*unstructured.Unstructured]{})
	s.crdFactory = apiextensionsinformers.NewSharedInformerFactory(crds, 0)
	s.crds = s.crdFactory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	_ = s.crds.SetTransform(func(obj any) (any, error) {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			// Discovery needs names, scope, versions and conditions only.
			crd.ManagedFields = nil
			crd.Annotations = nil
			for i := range crd.Spec.Versions {
				crd.Spec.Versions[i].Schema = nil
				crd.Spec.Versions[i].AdditionalPrinterColumns = nil
			}
		}
		return obj, nil
	})
	_, _ = s.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.rediscover() },
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*apiextensionsv1.CustomResourceDefinition)
			cur, ok2 := newObj.(*apiextensionsv1.CustomResourceDefinition)
			if !ok1 || !ok2 || signature(old) != signature(cur) {
				s.rediscover()
			}
		},
		DeleteFunc: func(any) { s.rediscover() },
	})
	return s
}

// rediscover asks the discovery loop for another round.
func (s *Source) rediscover() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// AddHandler registers h for adds (old nil), updates and deletes (cur nil)
// of templates of every resource, those discovered later included. h runs
// on an informer's goroutine and must not block. A handler added after
// Start hears only of later changes.
func (s *Source) AddHandler(h controller.Handler[*unstructured.Unstructured]) {
	for {
		old := s.handlers.Load()
		next := append(slices.Clip(*old), h)
		if s.handlers.CompareAndSwap(old, &next) {
			return
		}
	}
}

func (s *Source) currentHandlers() []controller.Handler[*unstructured.Unstructured] {
	return *s.handlers.Load()
}

// Start discovers and runs the informers until ctx ends; only the first
// call does anything.
func (s *Source) Start(ctx context.Context) {
	s.once.Do(func() { go s.run(ctx) })
}

// Run starts the Source (see Start) and returns once it has synced or ctx
// ended, so that controller.StartAndSync may call it from every controller
// that reads templates.
func (s *Source) Run(ctx context.Context) {
	s.Start(ctx)
	select {
	case <-s.synced:
	case <-ctx.Done():
	}
}

// Synced is closed once every resource of the first discovery has listed
// and its handlers have heard of the list.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// Get returns the template with key (names.TemplateKey), or nil. Callers must not
// modify it.
func (s *Source) Get(key string) *unstructured.Unstructured {
	gk, namespace, name, ok := names.ParseTemplateKey(key)
	if !ok {
		return nil
	}
	s.mu.RLock()
	r := s.byGK[gk]
	s.mu.RUnlock()
	if r == nil {
		return nil
	}
	return r.get(controller.Key(namespace, name))
}

// List returns every template. Callers must not modify them.
func (s *Source) List() []*unstructured.Unstructured {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*unstructured.Unstructured
	for _, r := range s.byGR {
		out = r.list(out)
	}
	return out
}

// Resources returns the resources whose informers run, sorted.
func (s *Source) Resources() []schema.GroupVersionResource {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]schema.GroupVersionResource, 0, len(s.byGR))
	for _, r := range s.byGR {
		out = append(out, r.gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource))
	})
	return out
}

// run is the discovery loop: a first discovery, then one after every
// change of a CRD's signature.
func (s *Source) run(ctx context.Context) {
	s.crdFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.crds.HasSynced) {
		return
	}
	// The CRDs' first list is in hand: their adds ask for nothing more.
	select {
	case <-s.kick:
	default:
	}
	first := true
	for {
		if d, ok := s.discoverAgreeing(ctx); ok {
			var pending []*resource
			s.apply(ctx, d, func(r *resource) { pending = append(pending, r) })
			if first {
				first = false
				if !s.waitSynced(ctx, pending...) {
					return
				}
				close(s.synced)
				s.logger.Info("templates synced", "resources", len(pending))
			}
		} else if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
	}
}

// discoverAgreeing discovers until the result agrees with the CRDs (or
// agreeAttempts ran out), retrying failures with backoff; ok is false only
// when ctx ended.
func (s *Source) discoverAgreeing(ctx context.Context) (discovered, bool) {
	backoff := agreePeriod
	for attempt := 1; ; attempt++ {
		d, err := discover(ctx, s.clients.Kube.Discovery())
		if ctx.Err() != nil {
			return d, false
		}
		if err != nil {
			s.logger.Warn("template discovery failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return d, false
			}
			backoff = min(2*backoff, retryMax)
			attempt = 0
			continue
		}
		if len(d.failed) > 0 {
			s.logger.Warn("template discovery missed groups; their informers stay as they are", "groups", fmt.Sprint(keys(d.failed)))
		}
		views := s.crdViews()
		if agrees(d, views, s.everCRD) {
			return d, true
		}
		if attempt >= agreeAttempts {
			s.logger.Warn("discovery does not show the CRDs as they are; going with discovery", "waited", time.Duration(attempt)*agreePeriod)
			return d, true
		}
		if !sleep(ctx, agreePeriod) {
			return d, false
		}
	}
}

// crdViews reads the CRDs, and remembers their resources in everCRD.
func (s *Source) crdViews() []crdView {
	objs := s.crds.GetStore().List()
	out := make([]crdView, 0, len(objs))
	for _, obj := range objs {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		v := viewOf(crd)
		s.everCRD[v.gr] = true
		out = append(out, v)
	}
	return out
}

// apply makes the running informers those of d: started for new
// resources (each passed to started), replaced for a new version, stopped
// (handlers told their objects are gone) for resources no longer served,
// unless discovery failed for their group.
func (s *Source) apply(ctx context.Context, d discovered, started func(*resource)) {
	s.mu.RLock()
	var added, replaced []served
	var removed []*resource
	for gr, sv := range d.resources {
		switch cur := s.byGR[gr]; {
		case cur == nil:
			added = append(added, sv)
		case cur.served != sv:
			replaced = append(replaced, sv)
		}
	}
	for gr, r := range s.byGR {
		if _, ok := d.resources[gr]; !ok && !d.failed[gr.Group] {
			removed = append(removed, r)
		}
	}
	s.mu.RUnlock()

	for _, r := range removed {
		s.mu.Lock()
		delete(s.byGR, r.gvr.GroupResource())
		if s.byGK[r.groupKind()] == r {
			delete(s.byGK, r.groupKind())
		}
		s.mu.Unlock()
		r.stopAndWait()
		s.logger.Info("template resource no longer served; its templates are gone", "resource", r.gvr.String())
		r.gone()
	}
	for _, sv := range added {
		r := newResource(s.clients.Dynamic, sv, true, s.currentHandlers, s.logger)
		s.mu.Lock()
		s.byGR[sv.gvr.GroupResource()] = r
		if other := s.byGK[sv.groupKind()]; other != nil {
			s.logger.Warn("two resources serve one kind; templates are read from the first", "kind", sv.groupKind().String(),
				"first", other.gvr.String(), "second", sv.gvr.String())
		} else {
			s.byGK[sv.groupKind()] = r
		}
		s.mu.Unlock()
		r.start(ctx)
		started(r)
		s.logger.Debug("template resource watched", "resource", sv.gvr.String())
	}
	for _, sv := range replaced {
		s.replace(ctx, sv)
	}
}

// replace moves a resource to a new version (or kind, or scope): the new
// informer lists first, then takes over from the old one.
func (s *Source) replace(ctx context.Context, sv served) {
	gr := sv.gvr.GroupResource()
	s.mu.RLock()
	old := s.byGR[gr]
	s.mu.RUnlock()
	r := newResource(s.clients.Dynamic, sv, false, s.currentHandlers, s.logger)
	r.start(ctx)
	if !s.waitSynced(ctx, r) || !r.synced() {
		r.stopAndWait()
		if ctx.Err() == nil {
			s.logger.Error("the new version of a template resource cannot be listed; staying on the old one", "resource", old.gvr.String(), "version", sv.gvr.Version)
		}
		return
	}
	old.stopAndWait()
	s.mu.Lock()
	s.byGR[gr] = r
	if s.byGK[old.groupKind()] == old {
		delete(s.byGK, old.groupKind())
	}
	if s.byGK[sv.groupKind()] == nil {
		s.byGK[sv.groupKind()] = r
	}
	s.mu.Unlock()
	r.takeOver(old)
	s.logger.Info("template resource moved to another version", "from", old.gvr.String(), "to", sv.gvr.String())
}

// waitSynced waits until every resource has listed, or syncTimeout has
// passed (the laggards are logged and left to list later), and reports
// whether ctx is still alive.
func (s *Source) waitSynced(ctx context.Context, resources ...*resource) bool {
	timeout := time.NewTimer(syncTimeout)
	defer timeout.Stop()
wait:
	for _, r := range resources {
		select {
		case <-r.registration.HasSyncedChecker().Done():
		case <-timeout.C:
			break wait
		case <-ctx.Done():
			return false
		}
	}
	for _, r := range resources {
		if !r.synced() {
			s.logger.Error("template resource not listed in time; its templates are missing until it is", "resource", r.gvr.String(), "waited", syncTimeout)
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
