package hubapi

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// testFinalizer stands for a controller's finalizer that no controller
// will remove.
const testFinalizer = "flotilla.io/test"

// TestNamespaceIsolates: each namespace is new and unique, and at test end
// it is gone with everything in it, objects with finalizers and a Pod bound
// to a node (which no kubelet will ever confirm deleted) included.
func TestNamespaceIsolates(t *testing.T) {
	env := Start(t)
	var first, second string
	t.Run("Test_with/namespaces", func(t *testing.T) {
		first, second = env.Namespace(t), env.Namespace(t)
		if first == second {
			t.Fatalf("two namespaces named %s", first)
		}
		if !strings.HasPrefix(first, "testnamespaceisolates-test-with-") {
			t.Errorf("namespace %s is not named after the test", first)
		}
		ctx := t.Context()
		fl := env.Flotilla.FlotillaV1alpha1()
		withFinalizer := metav1.ObjectMeta{Name: "web-deployment", Finalizers: []string{testFinalizer}}
		deployment := v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: first, Name: "web"}
		if _, err := fl.ResourceBindings(first).Create(ctx, &v1alpha1.ResourceBinding{ObjectMeta: withFinalizer, Spec: v1alpha1.ResourceBindingSpec{Resource: deployment}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := fl.Works(first).Create(ctx, &v1alpha1.Work{ObjectMeta: withFinalizer}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A Work the test deleted, left Terminating by its finalizer.
		if err := fl.Works(first).Delete(ctx, withFinalizer.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		policy := &v1alpha1.PropagationPolicy{ObjectMeta: named("web"), Spec: v1alpha1.PropagationSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment"}},
		}}
		if _, err := fl.PropagationPolicies(first).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		core := env.Kube.CoreV1()
		configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Finalizers: []string{testFinalizer}}}
		if _, err := core.ConfigMaps(first).Create(ctx, configMap, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: named("web"),
			Spec: corev1.PodSpec{
				NodeName:   "member-node",
				Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
			},
		}
		if _, err := core.Pods(first).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create a Pod (admission as on the hub: no ServiceAccount needed): %v", err)
		}
		if _, err := core.ConfigMaps(second).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the other namespace sees the ConfigMap: err = %v", err)
		}
	})
	if t.Failed() {
		return
	}

	ctx := t.Context()
	for _, ns := range []string{first, second} {
		if _, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s after the test: err = %v, want NotFound", ns, err)
		}
	}
	for _, gvr := range []schema.GroupVersionResource{
		v1alpha1.SchemeGroupVersion.WithResource("resourcebindings"),
		v1alpha1.SchemeGroupVersion.WithResource("works"),
		v1alpha1.SchemeGroupVersion.WithResource("propagationpolicies"),
		corev1.SchemeGroupVersion.WithResource("configmaps"),
		corev1.SchemeGroupVersion.WithResource("pods"),
	} {
		noneLeft(t, env, gvr, first)
	}
}

// TestCleanupDeletesClusterScoped: Cleanup leaves no object of any
// cluster-scoped Flotilla kind, stuck Terminating ones included.
func TestCleanupDeletesClusterScoped(t *testing.T) {
	env := Start(t)
	fl, apps := env.Flotilla.FlotillaV1alpha1(), env.Flotilla.AppsV1alpha1()
	withFinalizer := metav1.ObjectMeta{Name: "cleanup-test", Finalizers: []string{testFinalizer}}
	namespaceRef := v1alpha1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "team-a"}
	// One object with a finalizer per cluster-scoped kind, by CRD name.
	creators := map[string]func(ctx context.Context) error{
		"clusters.flotilla.io": func(ctx context.Context) error {
			_, err := fl.Clusters().Create(ctx, &v1alpha1.Cluster{ObjectMeta: withFinalizer}, metav1.CreateOptions{})
			return err
		},
		"clusterpropagationpolicies.flotilla.io": func(ctx context.Context) error {
			policy := &v1alpha1.ClusterPropagationPolicy{ObjectMeta: withFinalizer, Spec: v1alpha1.PropagationSpec{
				ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "Namespace"}},
			}}
			_, err := fl.ClusterPropagationPolicies().Create(ctx, policy, metav1.CreateOptions{})
			return err
		},
		"clusterresourcebindings.flotilla.io": func(ctx context.Context) error {
			binding := &v1alpha1.ClusterResourceBinding{ObjectMeta: withFinalizer, Spec: v1alpha1.ResourceBindingSpec{Resource: namespaceRef}}
			_, err := fl.ClusterResourceBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
		"purgerequests.flotilla.io": func(ctx context.Context) error {
			request := &v1alpha1.PurgeRequest{ObjectMeta: withFinalizer, Spec: v1alpha1.PurgeRequestSpec{
				Binding: v1alpha1.BindingReference{Name: "team-a-namespace"}, Cluster: "member-1",
			}}
			_, err := fl.PurgeRequests().Create(ctx, request, metav1.CreateOptions{})
			return err
		},
		"clustertaintpolicies.flotilla.io": func(ctx context.Context) error {
			policy := &v1alpha1.ClusterTaintPolicy{ObjectMeta: withFinalizer, Spec: v1alpha1.ClusterTaintPolicySpec{
				Taints: []v1alpha1.PolicyTaint{{Key: "example.com/degraded", Effect: "NoSchedule"}},
			}}
			_, err := fl.ClusterTaintPolicies().Create(ctx, policy, metav1.CreateOptions{})
			return err
		},
		"workloadrebalancers.apps.flotilla.io": func(ctx context.Context) error {
			rebalancer := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: withFinalizer, Spec: appsv1alpha1.WorkloadRebalancerSpec{
				Workloads: []appsv1alpha1.ObjectReference{{APIVersion: "v1", Kind: "Namespace", Name: "team-a"}},
			}}
			_, err := apps.WorkloadRebalancers().Create(ctx, rebalancer, metav1.CreateOptions{})
			return err
		},
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("test with cluster-scoped objects", func(t *testing.T) {
		env.Cleanup(t)
		for _, crd := range all {
			if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
				continue
			}
			create, ok := creators[crd.Name]
			if !ok {
				t.Errorf("cluster-scoped CRD %s has no object here", crd.Name)
				continue
			}
			if err := create(t.Context()); err != nil {
				t.Fatalf("create %s: %v", crd.Spec.Names.Kind, err)
			}
		}
		// A Cluster the test deleted, left Terminating by its finalizer.
		if err := fl.Clusters().Delete(t.Context(), withFinalizer.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		return
	}

	for _, gvr := range env.clusterKinds {
		noneLeft(t, env, gvr, "")
	}
}

// noneLeft checks that no object of gvr is left in namespace ("" for a
// cluster-scoped resource).
func noneLeft(t *testing.T, env *Env, gvr schema.GroupVersionResource, namespace string) {
	t.Helper()
	list, err := env.Dynamic.Resource(gvr).Namespace(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range list.Items {
		t.Errorf("%s %s/%s left after the test", gvr.Resource, namespace, obj.GetName())
	}
}
