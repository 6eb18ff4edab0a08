package karmada

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

const waitTimeout = 10 * time.Second

var (
	karmadaPolicies    = schema.GroupVersionResource{Group: crds.KarmadaPolicyGroup, Version: "v1alpha1", Resource: "propagationpolicies"}
	flotillaPolicies   = schema.GroupVersionResource{Group: "flotilla.io", Version: "v1alpha1", Resource: "propagationpolicies"}
	karmadaRebalancers = schema.GroupVersionResource{Group: crds.KarmadaAppsGroup, Version: "v1alpha1", Resource: "workloadrebalancers"}
	flotillaRebalancer = schema.GroupVersionResource{Group: "apps.flotilla.io", Version: "v1alpha1", Resource: "workloadrebalancers"}
)

type fixture struct {
	t      *testing.T
	dyn    dynamic.Interface
	ns     string
	events *controllertest.Recorder
}

// newFixture runs a Mirror against the test binary's API server.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := controllertest.New(t)
	f.Start(nil, 2, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		return New(clients, informers, f.Events, controllertest.Logger(t))
	})
	return &fixture{t: t, dyn: f.Env.Dynamic, ns: f.Namespace, events: f.Events}
}

func (f *fixture) api(gvr schema.GroupVersionResource, namespaced bool) dynamic.ResourceInterface {
	if namespaced {
		return f.dyn.Resource(gvr).Namespace(f.ns)
	}
	return f.dyn.Resource(gvr)
}

func (f *fixture) create(gvr schema.GroupVersionResource, doc string) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		f.t.Fatal(err)
	}
	got, err := f.api(gvr, u.GetNamespace() != "").Create(f.t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create %s: %v", u.GetName(), err)
	}
	return got
}

// waitFor polls until cond holds on the object (nil: absent).
func (f *fixture) waitFor(gvr schema.GroupVersionResource, namespaced bool, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	f.t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(f.t.Context(), 10*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := f.api(gvr, namespaced).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return cond(nil), nil
		}
		if err != nil {
			return false, err
		}
		last = got
		return cond(got), nil
	})
	if err != nil {
		f.t.Fatalf("%s %s: %s: %v (last: %v)", gvr.GroupResource(), name, what, err, last)
	}
	return last
}

func spec(u *unstructured.Unstructured) any {
	if u == nil {
		return nil
	}
	return u.Object["spec"]
}

func gone(u *unstructured.Unstructured) bool { return u == nil }

func (f *fixture) policyDoc(name, cluster string) string {
	return fmt.Sprintf(`apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: %s, namespace: %s, labels: {team: shop}, annotations: {note: kept, kubectl.kubernetes.io/last-applied-configuration: "{}"}}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement: {clusterAffinity: {clusterNames: [%s]}}
`, name, f.ns, cluster)
}

func TestPolicyTwinFollowsItsSource(t *testing.T) {
	f := newFixture(t)
	src := f.create(karmadaPolicies, f.policyDoc("nginx", "member-1"))

	twin := f.waitFor(flotillaPolicies, true, "nginx", "twin made", func(u *unstructured.Unstructured) bool { return u != nil })
	if diff := cmp.Diff(spec(src), spec(twin)); diff != "" {
		t.Errorf("twin spec (-source +twin):\n%s", diff)
	}
	wantLabels := map[string]string{"team": "shop", LabelMirrorOf: crds.KarmadaPolicyGroup}
	if diff := cmp.Diff(wantLabels, twin.GetLabels()); diff != "" {
		t.Errorf("twin labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"note": "kept"}, twin.GetAnnotations()); diff != "" {
		t.Errorf("twin annotations (-want +got):\n%s", diff)
	}
	f.waitFor(karmadaPolicies, true, "nginx", "source marked with its twin's UID", func(u *unstructured.Unstructured) bool {
		return u != nil && u.GetAnnotations()[AnnotationMirrorUID] == string(twin.GetUID())
	})

	t.Run("a source edit reaches the twin", func(t *testing.T) {
		cur := f.waitFor(karmadaPolicies, true, "nginx", "read", func(u *unstructured.Unstructured) bool { return u != nil })
		_ = unstructured.SetNestedStringSlice(cur.Object, []string{"member-2"}, "spec", "placement", "clusterAffinity", "clusterNames")
		if _, err := f.api(karmadaPolicies, true).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitFor(flotillaPolicies, true, "nginx", "twin follows", func(u *unstructured.Unstructured) bool {
			names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "placement", "clusterAffinity", "clusterNames")
			return strings.Join(names, ",") == "member-2"
		})
	})
	t.Run("a twin edit is put back", func(t *testing.T) {
		cur := f.waitFor(flotillaPolicies, true, "nginx", "read", func(u *unstructured.Unstructured) bool { return u != nil })
		_ = unstructured.SetNestedStringSlice(cur.Object, []string{"member-3"}, "spec", "placement", "clusterAffinity", "clusterNames")
		if _, err := f.api(flotillaPolicies, true).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitFor(flotillaPolicies, true, "nginx", "twin put back", func(u *unstructured.Unstructured) bool {
			names, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "placement", "clusterAffinity", "clusterNames")
			return strings.Join(names, ",") == "member-2"
		})
	})
	t.Run("deleting the source deletes the twin", func(t *testing.T) {
		if err := f.api(karmadaPolicies, true).Delete(t.Context(), "nginx", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitFor(flotillaPolicies, true, "nginx", "twin deleted", gone)
	})
}

func TestDeletingTheTwinDeletesTheSource(t *testing.T) {
	f := newFixture(t)
	f.create(karmadaPolicies, f.policyDoc("web", "member-1"))
	twin := f.waitFor(flotillaPolicies, true, "web", "twin made", func(u *unstructured.Unstructured) bool { return u != nil })
	f.waitFor(karmadaPolicies, true, "web", "source marked", func(u *unstructured.Unstructured) bool {
		return u.GetAnnotations()[AnnotationMirrorUID] == string(twin.GetUID())
	})
	if err := f.api(flotillaPolicies, true).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(karmadaPolicies, true, "web", "source deleted", gone)
	f.waitFor(flotillaPolicies, true, "web", "twin stays deleted", gone)
}

func TestANameTakenByAFlotillaObjectIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	own := f.create(flotillaPolicies, strings.Replace(f.policyDoc("shop", "member-9"), crds.KarmadaPolicyGroup, "flotilla.io", 1))
	f.create(karmadaPolicies, f.policyDoc("shop", "member-1"))
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return f.events.Count("Warning "+ReasonNameTaken+" PropagationPolicy shop:") > 0, nil
	}); err != nil {
		t.Fatalf("no %s event: %v", ReasonNameTaken, err)
	}
	got := f.waitFor(flotillaPolicies, true, "shop", "read", func(u *unstructured.Unstructured) bool { return u != nil })
	if got.GetResourceVersion() != own.GetResourceVersion() {
		t.Errorf("the flotilla.io policy was changed: %v", got.Object)
	}
}

func TestRebalancerStatusIsCopiedBack(t *testing.T) {
	f := newFixture(t)
	f.create(karmadaRebalancers, `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: again}
spec:
  workloads: [{apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: shop}]
`)
	twin := f.waitFor(flotillaRebalancer, false, "again", "twin made", func(u *unstructured.Unstructured) bool { return u != nil })
	// No rebalancer controller runs here: write the twin's status as it would.
	status := map[string]any{"observedGeneration": int64(1), "observedWorkloads": []any{map[string]any{
		"workload": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx", "namespace": "shop"},
		"result":   "Failed", "reason": "ReferencedBindingNotFound"}}}
	twin.Object["status"] = status
	if _, err := f.api(flotillaRebalancer, false).UpdateStatus(t.Context(), twin, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := f.waitFor(karmadaRebalancers, false, "again", "status copied", func(u *unstructured.Unstructured) bool {
		st, _ := u.Object["status"].(map[string]any)
		return st["observedWorkloads"] != nil
	})
	if diff := cmp.Diff(status, got.Object["status"]); diff != "" {
		t.Errorf("source status (-want +got):\n%s", diff)
	}
}
