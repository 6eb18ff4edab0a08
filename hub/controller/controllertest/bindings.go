package controllertest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// CreateCluster creates a cluster with taints, and no status.
func (f *Fixture) CreateCluster(name string, taints ...corev1.Taint) {
	f.T.Helper()
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterSpec{Taints: taints}}
	if _, err := f.Flotilla.Clusters().Create(f.T.Context(), c, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

// SetTaints replaces a cluster's taints.
func (f *Fixture) SetTaints(name string, taints ...corev1.Taint) {
	f.T.Helper()
	clusters := f.Flotilla.Clusters()
	edit(f.T, name, clusters.Get, func(c *v1alpha1.Cluster) { c.Spec.Taints = taints }, clusters.Update)
}

// SetConditions replaces a cluster's status conditions.
func (f *Fixture) SetConditions(name string, conditions ...metav1.Condition) {
	f.T.Helper()
	clusters := f.Flotilla.Clusters()
	edit(f.T, name, clusters.Get, func(c *v1alpha1.Cluster) { c.Status.Conditions = conditions }, clusters.UpdateStatus)
}

// CreateDeploymentBinding creates the ResourceBinding NAME-deployment of
// the Deployment name in the test's namespace, with spec (its resource
// set to that Deployment), and returns it as stored.
func (f *Fixture) CreateDeploymentBinding(name string, spec v1alpha1.ResourceBindingSpec) *v1alpha1.ResourceBinding {
	f.T.Helper()
	spec.Resource = v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: f.Namespace, Name: name}
	b := &v1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-deployment", Namespace: f.Namespace}, Spec: spec}
	b, err := f.Flotilla.ResourceBindings(f.Namespace).Create(f.T.Context(), b, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return b
}

// CreateBinding creates a ResourceBinding when meta has a namespace, a
// ClusterResourceBinding when not, with spec, then writes status unless it
// is nil.
func (f *Fixture) CreateBinding(meta metav1.ObjectMeta, spec v1alpha1.ResourceBindingSpec, status *v1alpha1.ResourceBindingStatus) {
	f.T.Helper()
	ctx := f.T.Context()
	var err error
	if meta.Namespace == "" {
		var b *v1alpha1.ClusterResourceBinding
		b, err = f.Flotilla.ClusterResourceBindings().Create(ctx, &v1alpha1.ClusterResourceBinding{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
		if err == nil && status != nil {
			b.Status = *status
			_, err = f.Flotilla.ClusterResourceBindings().UpdateStatus(ctx, b, metav1.UpdateOptions{})
		}
	} else {
		var b *v1alpha1.ResourceBinding
		b, err = f.Flotilla.ResourceBindings(meta.Namespace).Create(ctx, &v1alpha1.ResourceBinding{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{})
		if err == nil && status != nil {
			b.Status = *status
			_, err = f.Flotilla.ResourceBindings(meta.Namespace).UpdateStatus(ctx, b, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		f.T.Fatal(err)
	}
}

// BindingSpec reads the spec and generation of the ResourceBinding
// namespace/name, or of the ClusterResourceBinding name when namespace is
// empty.
func (f *Fixture) BindingSpec(namespace, name string) (v1alpha1.ResourceBindingSpec, int64) {
	f.T.Helper()
	if namespace == "" {
		b, err := f.Flotilla.ClusterResourceBindings().Get(f.T.Context(), name, metav1.GetOptions{})
		if err != nil {
			f.T.Fatal(err)
		}
		return b.Spec, b.Generation
	}
	b, err := f.Flotilla.ResourceBindings(namespace).Get(f.T.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return b.Spec, b.Generation
}

// EditBindingSpec changes the spec of a ResourceBinding of the test's
// namespace, as another controller would, and returns it as stored.
func (f *Fixture) EditBindingSpec(name string, change func(*v1alpha1.ResourceBindingSpec)) *v1alpha1.ResourceBinding {
	f.T.Helper()
	bindings := f.Flotilla.ResourceBindings(f.Namespace)
	return edit(f.T, name, bindings.Get, func(b *v1alpha1.ResourceBinding) { change(&b.Spec) }, bindings.Update)
}

// EditBindingStatus changes the status of a ResourceBinding of the test's
// namespace, as another controller would, and returns it as stored.
func (f *Fixture) EditBindingStatus(name string, change func(*v1alpha1.ResourceBinding)) *v1alpha1.ResourceBinding {
	f.T.Helper()
	bindings := f.Flotilla.ResourceBindings(f.Namespace)
	return edit(f.T, name, bindings.Get, change, bindings.UpdateStatus)
}

// edit reads the object name, changes it and writes it back with update,
// again on a conflict, and returns it as stored.
func edit[T any](t *testing.T, name string,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	change func(T),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
) T {
	t.Helper()
	ctx := t.Context()
	var out T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(obj)
		out, err = update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// AwaitBinding polls the API until cond holds for the ResourceBinding name
// of the test's namespace, and returns it; what says what is awaited.
func (f *Fixture) AwaitBinding(name, what string, cond func(*v1alpha1.ResourceBinding) bool) *v1alpha1.ResourceBinding {
	f.T.Helper()
	b := &v1alpha1.ResourceBinding{}
	err := wait.PollUntilContextTimeout(f.T.Context(), 5*time.Millisecond, WaitTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := f.Flotilla.ResourceBindings(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		b = got
		return cond(b), nil
	})
	if err != nil {
		f.T.Fatalf("waiting for binding %s: %s: %v; last seen spec %+v status %+v", name, what, err, b.Spec, b.Status)
	}
	return b
}
