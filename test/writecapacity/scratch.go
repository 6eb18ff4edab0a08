package writecapacity

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/apiwrites"
)

// Samples are real objects whose content the scratch ones copy, so that
// they weigh what the hub's do. Placement, clusters and eviction tasks are
// never copied: a scratch binding stays unscheduled.
type Samples struct {
	Binding    *v1alpha1.ResourceBinding
	Work       *v1alpha1.Work
	Deployment *appsv1.Deployment
}

// scratch makes and removes the measurement's objects.
type scratch struct {
	kube     kubernetes.Interface
	flotilla flotillaclient.Interface
	ns       string
	samples  Samples
}

func (s *scratch) createNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("write capacity: create namespace %s: %w", s.ns, err)
	}
	return nil
}

// deleteNamespace removes the namespace and so every scratch object,
// whatever became of the measurement's context.
func (s *scratch) deleteNamespace() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.kube.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
}

// supported says whether the measurement can make writes of kind w.
func supported(w apiwrites.Write) bool {
	verbs, ok := resourceVerbs[w.Resource]
	return ok && verbs[w.Subresource+"/"+w.Verb]
}

// resourceVerbs are the writes the scratch objects take, as
// "subresource/verb".
var resourceVerbs = map[string]map[string]bool{
	"resourcebindings": {"/create": true, "/update": true, "status/update": true, "/delete": true},
	"works":            {"/create": true, "/update": true, "status/update": true, "/delete": true},
	"deployments":      {"/create": true, "/update": true, "status/update": true, "/delete": true},
	"events":           {"/create": true, "/patch": true, "/delete": true},
	"leases":           {"/create": true, "/update": true, "/delete": true},
}

// prepare gives each of n workers its own object of every resource the
// plan writes, and fills a shared pool of pool objects for each resource
// the plan deletes.
func (s *scratch) prepare(ctx context.Context, plan []apiwrites.Write, n, pool int) ([]*worker, error) {
	deleted := map[string]bool{}
	used := map[string]bool{}
	for _, w := range plan {
		used[w.Resource] = true
		if w.Verb == apiwrites.Delete {
			deleted[w.Resource] = true
		}
	}
	pools := map[string]chan string{}
	for res := range deleted {
		ops, err := s.ops(res)
		if err != nil {
			return nil, err
		}
		ch := make(chan string, pool)
		for range pool {
			name, err := ops.create(ctx, 0)
			if err != nil {
				return nil, fmt.Errorf("write capacity: make %s to delete: %w", res, err)
			}
			ch <- name
		}
		pools[res] = ch
	}
	workers := make([]*worker, n)
	for i := range workers {
		w := &worker{ops: map[string]objectOps{}, pools: pools}
		for res := range used {
			ops, err := s.ops(res)
			if err != nil {
				return nil, err
			}
			if _, err := ops.create(ctx, 0); err != nil {
				return nil, fmt.Errorf("write capacity: make the %s of client %d: %w", res, i, err)
			}
			w.ops[res] = ops
		}
		workers[i] = w
	}
	return workers, nil
}

// worker makes writes on its own objects.
type worker struct {
	ops   map[string]objectOps
	pools map[string]chan string
	n     int
}

// write makes one write of kind k; it returns the conflicts it met.
func (w *worker) write(ctx context.Context, k apiwrites.Write) (int, error) {
	w.n++
	ops := w.ops[k.Resource]
	switch k.Subresource + "/" + k.Verb {
	case "/create":
		_, err := ops.create(ctx, w.n)
		return 0, err
	case "/update":
		return ops.update(ctx, w.n)
	case "status/update":
		return ops.updateStatus(ctx, w.n)
	case "/patch":
		return 0, ops.patch(ctx, w.n)
	case "/delete":
		select {
		case name := <-w.pools[k.Resource]:
			return 0, ops.delete(ctx, name)
		default:
			return 0, errPoolEmpty
		}
	}
	return 0, fmt.Errorf("write capacity: %v is not made", k)
}

// objectOps makes the writes of one resource; it keeps the object it last
// created, which its updates change.
type objectOps interface {
	create(ctx context.Context, n int) (name string, err error)
	update(ctx context.Context, n int) (conflicts int, err error)
	updateStatus(ctx context.Context, n int) (conflicts int, err error)
	patch(ctx context.Context, n int) error
	delete(ctx context.Context, name string) error
}

// typedClient is what client-go's typed clients have in common.
type typedClient[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// resource makes the writes of one kind of object T.
type resource[T interface {
	metav1.Object
	runtime.Object
}] struct {
	client    typedClient[T]
	fresh     func() T                                                  // a new scratch object
	status    func(context.Context, T, metav1.UpdateOptions) (T, error) // nil: no status
	setStatus func(T, int)
	patchBody func(int) []byte // a merge patch; nil: no patch
	own       T
}

func (r *resource[T]) create(ctx context.Context, n int) (string, error) {
	obj, err := r.client.Create(ctx, r.fresh(), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	r.own = obj
	return obj.GetName(), nil
}

func (r *resource[T]) refresh(ctx context.Context) error {
	obj, err := r.client.Get(ctx, r.own.GetName(), metav1.GetOptions{})
	if err == nil {
		r.own = obj
	}
	return err
}

func (r *resource[T]) update(ctx context.Context, n int) (int, error) {
	return retryConflict(ctx, func() error {
		annotations := r.own.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[probeAnnotation] = fmt.Sprint(n)
		r.own.SetAnnotations(annotations)
		obj, err := r.client.Update(ctx, r.own, metav1.UpdateOptions{})
		if err == nil {
			r.own = obj
		}
		return err
	}, r.refresh)
}

func (r *resource[T]) updateStatus(ctx context.Context, n int) (int, error) {
	if r.status == nil {
		return 0, fmt.Errorf("write capacity: %T has no status", r.own)
	}
	return retryConflict(ctx, func() error {
		r.setStatus(r.own, n)
		obj, err := r.status(ctx, r.own, metav1.UpdateOptions{})
		if err == nil {
			r.own = obj
		}
		return err
	}, r.refresh)
}

func (r *resource[T]) patch(ctx context.Context, n int) error {
	if r.patchBody == nil {
		return fmt.Errorf("write capacity: %T is not patched", r.own)
	}
	obj, err := r.client.Patch(ctx, r.own.GetName(), types.MergePatchType, r.patchBody(n), metav1.PatchOptions{})
	if err == nil {
		r.own = obj
	}
	return err
}

func (r *resource[T]) delete(ctx context.Context, name string) error {
	return r.client.Delete(ctx, name, metav1.DeleteOptions{})
}

// ops returns a new objectOps of resource res (one of resourceVerbs).
func (s *scratch) ops(res string) (objectOps, error) {
	switch res {
	case "resourcebindings":
		c := s.flotilla.FlotillaV1alpha1().ResourceBindings(s.ns)
		return &resource[*v1alpha1.ResourceBinding]{client: c, fresh: s.binding, status: c.UpdateStatus, setStatus: s.bindingStatus}, nil
	case "works":
		c := s.flotilla.FlotillaV1alpha1().Works(s.ns)
		return &resource[*v1alpha1.Work]{client: c, fresh: s.work, status: c.UpdateStatus, setStatus: s.workStatus}, nil
	case "deployments":
		c := s.kube.AppsV1().Deployments(s.ns)
		return &resource[*appsv1.Deployment]{client: c, fresh: s.deployment, status: c.UpdateStatus, setStatus: deploymentStatus}, nil
	case "events":
		return &resource[*corev1.Event]{client: s.kube.CoreV1().Events(s.ns), fresh: s.event, patchBody: eventPatch}, nil
	case "leases":
		return &resource[*coordinationv1.Lease]{client: s.kube.CoordinationV1().Leases(s.ns), fresh: s.lease}, nil
	}
	return nil, fmt.Errorf("write capacity: no scratch objects of %s", res)
}
