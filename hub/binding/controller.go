// Package binding is the binding controller: it renders each binding's
// template into one Work per target cluster (replicas revised when the
// binding divides them), keeps the Works of clusters that are being
// evicted, and turns every other Work of the binding into a tombstone that
// stays until the agent confirms its objects are gone.
package binding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/objects"
)

// Controller renders Works.
type Controller struct {
	objs            *objects.Objects
	clock           clock.PassiveClock
	logger          *slog.Logger
	bindings        *controller.Informer[v1alpha1.ResourceBinding, *v1alpha1.ResourceBinding]
	clusterBindings *controller.Informer[v1alpha1.ClusterResourceBinding, *v1alpha1.ClusterResourceBinding]
	templates       *controller.Informer[unstructured.Unstructured, *unstructured.Unstructured]
	works           *controller.Informer[v1alpha1.Work, *v1alpha1.Work]
	queue           *controller.Queue

	mu sync.Mutex
	// worksOf indexes Work keys by the binding key in their annotation.
	worksOf map[string]map[string]bool
}

// New returns a binding controller over objs.
func New(objs *objects.Objects, clk clock.PassiveClock, logger *slog.Logger) *Controller {
	c := &Controller{objs: objs, clock: clk, logger: logger.With("controller", "binding"), worksOf: map[string]map[string]bool{}}
	c.bindings = controller.NewInformer(objs.Bindings, nil, logger)
	c.clusterBindings = controller.NewInformer(objs.ClusterBindings, nil, logger)
	c.templates = controller.NewInformer(objs.Templates, detector.TemplateKey, logger)
	c.works = controller.NewInformer(objs.Works, nil, logger)
	c.queue = controller.NewQueue("binding", c.reconcile, logger)
	// Status writes (the status controller's, every few seconds during a
	// rollout) change nothing a Work is rendered from: only spec changes
	// of bindings, and generation changes of templates, requeue.
	c.bindings.AddHandler(func(old, cur *v1alpha1.ResourceBinding) {
		if old == nil || cur == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
			b := controller.Subject(old, cur)
			c.queue.Add(controller.Key(b.Namespace, b.Name))
		}
	})
	c.clusterBindings.AddHandler(func(old, cur *v1alpha1.ClusterResourceBinding) {
		if old == nil || cur == nil || !equality.Semantic.DeepEqual(old.Spec, cur.Spec) {
			c.queue.Add(controller.Subject(old, cur).Name)
		}
	})
	c.templates.AddHandler(func(old, cur *unstructured.Unstructured) {
		if old != nil && cur != nil && old.GetGeneration() == cur.GetGeneration() {
			return
		}
		u := controller.Subject(old, cur)
		c.queue.Add(controller.Key(u.GetNamespace(), detector.BindingName(u.GetName(), u.GetKind())))
	})
	c.works.AddHandler(c.indexWork)
	return c
}

// indexWork keeps worksOf current and requeues the owner of a Work that
// changed, so a Work edited or lost behind the controller's back is fixed.
func (c *Controller) indexWork(old, cur *v1alpha1.Work) {
	w := controller.Subject(old, cur)
	key, owner := controller.Key(w.Namespace, w.Name), w.Annotations[v1alpha1.AnnotationWorkBinding]
	c.mu.Lock()
	if cur == nil {
		delete(c.worksOf[owner], key)
		if len(c.worksOf[owner]) == 0 {
			delete(c.worksOf, owner)
		}
	} else {
		if c.worksOf[owner] == nil {
			c.worksOf[owner] = map[string]bool{}
		}
		c.worksOf[owner][key] = true
	}
	c.mu.Unlock()
	if owner != "" {
		c.queue.Add(owner)
	}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Every mirror must be complete before the first reconcile: a binding
	// not listed yet would look deleted, and its Works would be tombstoned.
	if !controller.StartAndSync(ctx, c.templates, c.works, c.bindings, c.clusterBindings) {
		return
	}
	c.queue.Run(ctx, workers)
}

// target is what one cluster should run for a binding.
type target struct {
	replicas int32
	// keep: the cluster is being evicted; its Work stays as it is.
	keep bool
}

// reconcile brings the Works of one binding in step.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	spec, name, err := c.bindingSpec(key)
	if err != nil {
		return err
	}
	targets := map[string]target{}
	var template *unstructured.Unstructured
	if spec != nil {
		template = c.templates.Get(templateKey(spec.Resource))
		for _, tc := range spec.Clusters {
			targets[tc.Name] = target{replicas: tc.Replicas}
		}
		for _, task := range spec.GracefulEvictionTasks {
			// Directly: the old copy goes at once, before its replacement
			// runs — but not while no other cluster is placed: never the
			// last copy.
			_, placed := targets[task.FromCluster]
			direct := v1alpha1.NormalPurgeMode(task.PurgeMode) == v1alpha1.PurgeModeDirectly && len(spec.Clusters) > 0
			if !placed && !direct {
				targets[task.FromCluster] = target{keep: true}
			}
		}
	}
	if spec == nil || template == nil {
		// Tombstoning deletes workloads: make sure the binding or its
		// template is really gone from the store, not just late in a mirror.
		if err := c.confirmGone(ctx, key, spec); err != nil {
			return err
		}
		clear(targets)
	}
	workName := WorkName(key, name)
	for cluster, t := range targets {
		if t.keep {
			continue
		}
		if err := c.ensureWork(ctx, key, workName, cluster, template, spec, t.replicas); err != nil {
			return err
		}
	}
	return c.tombstoneOthers(ctx, key, targets)
}

// errNotMirrored asks for a retry: the store has an object the mirror
// has not caught up with yet.
var errNotMirrored = errors.New("in the store but not yet in the informer; retrying")

// confirmGone checks with the store that the binding (spec nil) or its
// template is gone before its Works are tombstoned.
func (c *Controller) confirmGone(ctx context.Context, key string, spec *v1alpha1.ResourceBindingSpec) error {
	var err error
	switch {
	case spec == nil && strings.Contains(key, "/"):
		namespace, name, _ := strings.Cut(key, "/")
		_, err = c.objs.Bindings.Get(ctx, namespace, name)
	case spec == nil:
		_, err = c.objs.ClusterBindings.Get(ctx, "", key)
	default:
		ref := spec.Resource
		gv, parseErr := schema.ParseGroupVersion(ref.APIVersion)
		if parseErr != nil {
			return nil
		}
		_, err = c.objs.Template(gv.WithKind(ref.Kind).GroupKind(), ref.Namespace != "").Get(ctx, ref.Namespace, ref.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("binding %s: %w", key, errNotMirrored)
}

// bindingSpec returns the spec and name of the binding with key, or a nil
// spec if it is gone.
func (c *Controller) bindingSpec(key string) (*v1alpha1.ResourceBindingSpec, string, error) {
	if strings.Contains(key, "/") {
		if b := c.bindings.Get(key); b != nil {
			return &b.Spec, b.Name, nil
		}
		_, name, _ := strings.Cut(key, "/")
		return nil, name, nil
	}
	if b := c.clusterBindings.Get(key); b != nil {
		return &b.Spec, b.Name, nil
	}
	return nil, key, nil
}

func templateKey(r v1alpha1.ObjectReference) string {
	group, _, _ := strings.Cut(r.APIVersion, "/")
	if !strings.Contains(r.APIVersion, "/") {
		group = ""
	}
	return group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
}

func isDivided(spec *v1alpha1.ResourceBindingSpec) bool {
	p := spec.Placement
	return spec.Replicas > 0 && p != nil && p.ReplicaScheduling != nil &&
		p.ReplicaScheduling.ReplicaSchedulingType == v1alpha1.ReplicaSchedulingTypeDivided
}

// fencing is the binding's fencing setting as a Work carries it, nil if
// the binding's policy does not ask for fencing.
func fencing(spec *v1alpha1.ResourceBindingSpec) *v1alpha1.WorkFencing {
	f := spec.Failover
	if f == nil || f.Cluster == nil || f.Cluster.Fencing == nil || f.Cluster.Fencing.StopAfterSeconds <= 0 {
		return nil
	}
	return &v1alpha1.WorkFencing{StopAfterSeconds: f.Cluster.Fencing.StopAfterSeconds}
}

// ensureWork creates or updates one cluster's Work; a tombstone that is
// wanted again comes back to life with a new generation.
func (c *Controller) ensureWork(ctx context.Context, bindingKey, name, cluster string, template *unstructured.Unstructured,
	spec *v1alpha1.ResourceBindingSpec, replicas int32) error {
	manifest, err := render(template, isDivided(spec), replicas)
	if err != nil {
		return err
	}
	want := v1alpha1.WorkSpec{Workload: v1alpha1.WorkloadTemplate{Manifests: []v1alpha1.Manifest{manifest}}, Fencing: fencing(spec)}
	wantReplicas := strconv.Itoa(int(replicas))
	namespace := v1alpha1.ExecutionNamespace(cluster)
	inStep := func(w *v1alpha1.Work) bool {
		return w.DeletionTimestamp == nil && equality.Semantic.DeepEqual(w.Spec, want) && w.Annotations[v1alpha1.AnnotationWorkReplicas] == wantReplicas
	}
	if current := c.works.Get(controller.Key(namespace, name)); current != nil && inStep(current) {
		return nil
	}
	stored, err := c.objs.Works.Get(ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		w := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Generation: 1,
			Annotations: map[string]string{v1alpha1.AnnotationWorkBinding: bindingKey, v1alpha1.AnnotationWorkReplicas: wantReplicas}}, Spec: want}
		if _, err := c.objs.Works.Create(ctx, w); err != nil {
			return fmt.Errorf("create Work %s/%s: %w", namespace, name, err)
		}
		c.logger.Info("work created", "binding", bindingKey, "cluster", cluster, "work", name)
		return nil
	case err != nil:
		return err
	}
	if inStep(stored) {
		return nil
	}
	if stored.DeletionTimestamp != nil || !equality.Semantic.DeepEqual(stored.Spec, want) {
		// Only a new spec goes to the agent: the annotation alone does not.
		stored.Spec, stored.DeletionTimestamp = want, nil
		stored.Generation++
	}
	if stored.Annotations == nil {
		stored.Annotations = map[string]string{}
	}
	stored.Annotations[v1alpha1.AnnotationWorkReplicas] = wantReplicas
	if _, err := c.objs.Works.Update(ctx, stored); err != nil {
		return fmt.Errorf("update Work %s/%s: %w", namespace, name, err)
	}
	c.logger.Info("work updated", "binding", bindingKey, "cluster", cluster, "work", name, "generation", stored.Generation)
	return nil
}

// tombstoneOthers marks every Work of the binding outside targets for
// deletion; the dispatcher removes it once the agent confirms.
func (c *Controller) tombstoneOthers(ctx context.Context, bindingKey string, targets map[string]target) error {
	c.mu.Lock()
	var keys []string
	for k := range c.worksOf[bindingKey] {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		namespace, name, _ := strings.Cut(k, "/")
		cluster := strings.TrimPrefix(namespace, v1alpha1.ExecutionNamespacePrefix)
		if _, wanted := targets[cluster]; wanted {
			continue
		}
		w := c.works.Get(k)
		if w == nil || w.DeletionTimestamp != nil {
			continue
		}
		stored, err := c.objs.Works.Get(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		now := metav1.NewTime(c.clock.Now())
		stored.DeletionTimestamp = &now
		if _, err := c.objs.Works.Update(ctx, stored); err != nil {
			return fmt.Errorf("mark Work %s for deletion: %w", k, err)
		}
		c.logger.Info("work marked for deletion", "binding", bindingKey, "cluster", cluster, "work", name)
	}
	return nil
}
