package controllertest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// CreateClusterWithExecutionNamespace creates a Cluster with a name of the
// API server's choosing, from generateName (cluster-scoped objects are
// shared by every test of the binary), and its execution namespace, and
// returns the name. At test end the namespace goes with every Work in it,
// finalizers cleared: stop the controllers first (register their clean-up
// later). The Cluster goes with env.Cleanup, which the caller registers.
func CreateClusterWithExecutionNamespace(t *testing.T, env *hubapi.Env, generateName string) string {
	t.Helper()
	cl, err := env.Flotilla.FlotillaV1alpha1().Clusters().Create(t.Context(),
		&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	namespace := v1alpha1.ExecutionNamespace(cl.Name)
	if _, err := env.Kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteExecutionNamespace(t, env, namespace) })
	return cl.Name
}

// deleteExecutionNamespace deletes every Work of namespace, finalizers
// cleared, then the namespace itself (finalized: no namespace controller
// runs).
func deleteExecutionNamespace(t *testing.T, env *hubapi.Env, namespace string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	works := env.Flotilla.FlotillaV1alpha1().Works(namespace)
	list, err := works.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("clean-up: list Works: %v", err)
		return
	}
	for _, w := range list.Items {
		if _, err := works.Patch(ctx, w.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: clear finalizers of Work %s: %v", w.Name, err)
		}
		if err := works.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: delete Work %s: %v", w.Name, err)
		}
	}
	namespaces := env.Kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("clean-up: delete namespace %s: %v", namespace, err)
		return
	}
	ns, err := namespaces.Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("clean-up: read namespace %s: %v", namespace, err)
		return
	}
	ns.Spec.Finalizers = nil
	if _, err := namespaces.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("clean-up: finalize namespace %s: %v", namespace, err)
	}
}
