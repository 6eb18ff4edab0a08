package admission

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/store"
)

// shared is one API server with Flotilla's plugins for the whole test
// binary: starting one takes seconds.
var shared struct {
	server *apiserver.Server
	ca     *pki.CA
	clock  *clocktesting.FakePassiveClock
	err    error
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "flotilla-admission-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := startServer(ctx, dir)
	shared.err = err
	code := m.Run()
	cancel()
	if shared.server != nil {
		<-shared.server.Done()
	}
	if s != nil {
		s.Close()
	}
	return code
}

// startServer starts etcd and the API server with the plugins, and installs
// the CRDs, the ClusterRoles and the lease namespace, as the hub does.
func startServer(ctx context.Context, dir string) (*store.Store, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	apiserver.RouteKlog(logger) // before the store: etcd's gRPC logs through klog
	s, err := store.Open(ctx, store.Config{DataDir: dir, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	shared.ca, err = pki.NewCA("test-ca", time.Hour)
	if err != nil {
		return s, err
	}
	shared.clock = clocktesting.NewFakePassiveClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	shared.server, err = apiserver.Start(ctx, apiserver.Config{
		DataDir: dir, Addr: "127.0.0.1:0", Etcd: apiserver.EtcdConfig{Servers: s.Endpoints()}, CA: shared.ca,
		Admission: Plugins(shared.clock, apiserver.HubUser), Logger: logger,
	})
	if err != nil {
		return s, fmt.Errorf("start API server: %w", err)
	}
	all, err := crds.All()
	if err != nil {
		return s, err
	}
	if err := crds.Install(ctx, shared.server.HubConfig, all); err != nil {
		return s, err
	}
	if err := apiserver.InstallRoles(ctx, shared.server.HubConfig); err != nil {
		return s, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.LeaseNamespace}}
	_, err = kubernetes.NewForConfigOrDie(shared.server.HubConfig).CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return s, err
}

// hub is the hub's own client configuration (group system:masters).
func hub(t *testing.T) *rest.Config {
	t.Helper()
	if shared.err != nil {
		t.Fatalf("start API server: %v", shared.err)
	}
	return rest.CopyConfig(shared.server.HubConfig)
}

// userConfig is a client authenticated as user (no groups) by a
// certificate of the test CA.
func userConfig(t *testing.T, name string) *rest.Config {
	t.Helper()
	cfg := hub(t)
	kp, err := shared.ca.Issue(pki.Request{CommonName: name, Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = kp.CertPEM, kp.KeyPEM
	return cfg
}

func weightedPolicy(name string, weights ...int64) *v1alpha1.PropagationPolicy {
	p := &v1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.PropagationSpec{
			ResourceSelectors: []v1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"}},
			Placement: v1alpha1.Placement{ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     v1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &v1alpha1.ClusterPreferences{},
			}},
		},
	}
	for i, w := range weights {
		p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList,
			v1alpha1.StaticClusterWeight{TargetCluster: v1alpha1.ClusterAffinity{ClusterNames: []string{fmt.Sprintf("member%d", i+1)}}, Weight: w})
	}
	return p
}

func TestServerRefusesInvalidPolicies(t *testing.T) {
	ctx := context.Background()
	policies := versioned.NewForConfigOrDie(hub(t)).FlotillaV1alpha1().PropagationPolicies("default")
	const want = `PropagationPolicy.flotilla.io "weighted" is invalid: spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight: Invalid value: -1: must not be negative`

	_, err := policies.Create(ctx, weightedPolicy("weighted", -1, 2), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Fatalf("create an invalid policy: %v\nwant: %s", err, want)
	}
	if _, err := policies.Get(ctx, "weighted", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused policy read back: %v, want NotFound", err)
	}

	stored, err := policies.Create(ctx, weightedPolicy("weighted", 1, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a valid policy: %v", err)
	}
	t.Cleanup(func() { _ = policies.Delete(context.Background(), stored.Name, metav1.DeleteOptions{}) })
	invalid := stored.DeepCopy()
	invalid.Spec.Placement.ReplicaScheduling.WeightPreference.StaticWeightList[0].Weight = -1
	if _, err := policies.Update(ctx, invalid, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || err.Error() != want {
		t.Fatalf("update to an invalid policy: %v\nwant: %s", err, want)
	}
	got, err := policies.Get(ctx, "weighted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored.Spec, got.Spec); diff != "" || got.ResourceVersion != stored.ResourceVersion {
		t.Errorf("policy after a refused update (-created +now):\n%s", diff)
	}
}

func TestServerStampsTaintTime(t *testing.T) {
	ctx := context.Background()
	clusters := versioned.NewForConfigOrDie(hub(t)).FlotillaV1alpha1().Clusters()
	t0 := shared.clock.Now()
	c := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "member-taints"},
		Spec:       v1alpha1.ClusterSpec{Taints: []corev1.Taint{{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule}}},
	}
	created, err := clusters.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clusters.Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
	t0Taint := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule, TimeAdded: ptr(metav1.NewTime(t0))}
	if diff := cmp.Diff([]corev1.Taint{t0Taint}, created.Spec.Taints); diff != "" {
		t.Errorf("taints after create (-want +got):\n%s", diff)
	}

	shared.clock.SetTime(t0.Add(time.Hour))
	next := created.DeepCopy()
	next.Spec.Taints[0].TimeAdded = nil // an old client, or a re-applied file
	next.Spec.Taints = append(next.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute})
	if _, err := clusters.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{t0Taint, {Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr(metav1.NewTime(t0.Add(time.Hour)))}}
	if diff := cmp.Diff(want, got.Spec.Taints); diff != "" {
		t.Errorf("taints after update (-want +got):\n%s", diff)
	}

	bad := got.DeepCopy()
	bad.Spec.Taints[1].Effect = "Evict"
	const refusal = `Cluster.flotilla.io "member-taints" is invalid: spec.taints[1].effect: Unsupported value: "Evict": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute", "PreferNoExecute"`
	if _, err := clusters.Update(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || err.Error() != refusal {
		t.Errorf("update with a bad effect: %v\nwant: %s", err, refusal)
	}
}

func TestServerProtectsFlotillaCRDs(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(hub(t))
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "otto-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: apiserver.OperatorRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "otto"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	otto := userConfig(t, "otto")
	ottoCRDs := apiextensionsclient.NewForConfigOrDie(otto).ApiextensionsV1().CustomResourceDefinitions()
	const crd = "clusters.flotilla.io"

	// RBAC lets otto write CRDs once its cache has the binding (a
	// template CRD would be deleted); the plugin refuses Flotilla's.
	const refusal = `customresourcedefinitions.apiextensions.k8s.io "clusters.flotilla.io" is forbidden: the CustomResourceDefinitions of flotilla.io and apps.flotilla.io are the Flotilla hub's`
	var err error
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err = ottoCRDs.Delete(ctx, crd, metav1.DeleteOptions{})
		return err == nil || strings.HasPrefix(err.Error(), refusal), nil
	})
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), refusal) || !strings.HasSuffix(err.Error(), `; user "otto" is not one`) {
		t.Fatalf("otto deletes CRD %s: %v, want Forbidden: %s...", crd, err, refusal)
	}
	got, err := ottoCRDs.Get(ctx, crd, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil {
		t.Fatalf("CRD %s after the refused delete: %v, deletion %v", crd, err, got.GetDeletionTimestamp())
	}
	got.Labels = map[string]string{"owner": "otto"}
	if _, err := ottoCRDs.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), refusal) {
		t.Errorf("otto updates CRD %s: %v, want Forbidden", crd, err)
	}
	err = kubernetes.NewForConfigOrDie(otto).CoreV1().Namespaces().Delete(ctx, v1alpha1.LeaseNamespace, metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "holds the leases of the member clusters") {
		t.Errorf("otto deletes namespace %s: %v, want Forbidden by the plugin", v1alpha1.LeaseNamespace, err)
	}

	// The admin kubeconfig (system:masters) may; the hub puts the CRD back.
	adminCfg, err := clientcmd.BuildConfigFromFlags("", shared.server.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	adminCRDs := apiextensionsclient.NewForConfigOrDie(adminCfg).ApiextensionsV1().CustomResourceDefinitions()
	if err := adminCRDs.Delete(ctx, crd, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("admin deletes CRD %s: %v", crd, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := adminCRDs.Get(ctx, crd, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("CRD %s not gone after the admin deleted it: %v", crd, err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(ctx, hub(t), all); err != nil {
		t.Fatalf("reinstall the CRDs: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestServerProtectsTokens: flotilla-operator may write Secrets, but not
// bootstrap tokens; a user bound to flotilla-admin may.
func TestServerProtectsTokens(t *testing.T) {
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(hub(t))
	for user, role := range map[string]string{"otto": apiserver.OperatorRole, "ada": apiserver.AdminRole} {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	token := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: "kube-system"},
			Type: "bootstrap.kubernetes.io/token", StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef"}}
	}
	otto := kubernetes.NewForConfigOrDie(userConfig(t, "otto")).CoreV1().Secrets("kube-system")
	const refusal = `secrets "bootstrap-token-abcdef" is forbidden: bootstrap tokens let a member cluster join the fleet`
	var err error
	// RBAC lets otto create Secrets once its cache has the binding.
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = otto.Create(ctx, token(), metav1.CreateOptions{})
		return err == nil || strings.HasPrefix(err.Error(), refusal), nil
	})
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), refusal) {
		t.Fatalf("operator creates a bootstrap token: %v, want Forbidden: %s...", err, refusal)
	}
	if _, err := otto.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "kube-system"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("operator creates an ordinary Secret in kube-system: %v", err)
	}
	ada := kubernetes.NewForConfigOrDie(userConfig(t, "ada")).CoreV1().Secrets("kube-system")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := ada.Create(ctx, token(), metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("flotilla-admin creates a bootstrap token: %v", err)
	}
	if err := otto.Delete(ctx, "bootstrap-token-abcdef", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("operator deletes a bootstrap token: %v, want Forbidden", err)
	}
	if err := ada.Delete(ctx, "bootstrap-token-abcdef", metav1.DeleteOptions{}); err != nil {
		t.Errorf("flotilla-admin deletes a bootstrap token: %v", err)
	}
}
