package dispatch

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// newCluster creates a Cluster with a name of the API server's choosing
// (cluster-scoped objects are shared by every test of the binary) and its
// execution namespace. At test end the Cluster goes (env.Cleanup) and so
// do the namespace and every Work in it, finalizers cleared: stop the
// dispatcher first (register its clean-up later).
func newCluster(t *testing.T, env *hubapi.Env) string {
	t.Helper()
	env.Cleanup(t)
	cl, err := env.Flotilla.FlotillaV1alpha1().Clusters().Create(t.Context(),
		&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "edge-"}}, metav1.CreateOptions{})
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
