package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const (
	// shopYAML is a well-behaved workload and its policy.
	shopYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: shop, image: "shop:1"}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: shop, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
`
	// hostileYAML binds cluster-admin.
	hostileYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: planted-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: shop}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: planted-admin}
spec:
  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, name: planted-admin}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
`
)

// TestMemberPolicy: under the agent's default member policy, a Work that
// writes into kube-system and one that binds cluster-admin are refused,
// and the hub says so (Work condition, events on the Work and the
// Cluster); a Deployment beside them applies and keeps running. Once the
// member's owner lists ClusterRoleBinding, that Work applies.
func TestMemberPolicy(t *testing.T) {
	f := startFleet(t, 1)
	f.apply("shop.yaml", shopYAML)
	f.waitDeploymentsOf("shop", "shop", map[string]int32{"member-1": 2}, "shop:1")
	start := time.Now()
	f.apply("hostile.yaml", hostileYAML)
	// The hub never makes Works of its own kube-system's templates: a
	// compromised hub writes the Work itself, a Deployment beside the
	// ConfigMap it plants.
	hostile := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "planted", Namespace: v1alpha1.ExecutionNamespace("member-1")},
		Spec: v1alpha1.WorkSpec{Workload: v1alpha1.WorkloadTemplate{Manifests: []v1alpha1.Manifest{
			manifest(t, shopDeployment("decoy")), manifest(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "planted", "namespace": "kube-system"}, "data": map[string]any{"x": "y"}}),
		}}}}
	flotilla, err := versioned.NewForConfig(f.hub.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flotilla.FlotillaV1alpha1().Works(hostile.Namespace).Create(t.Context(), hostile, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, kind := range []string{"ConfigMap", "ClusterRoleBinding"} {
		refused := waitRefused(t, f, kind, map[string]string{"ConfigMap": "planted", "ClusterRoleBinding": "planted-admin"}[kind])
		t.Logf("%s refused %v after the apply: %s", kind, time.Since(start).Round(time.Millisecond), describeWork(refused))
	}
	client := f.clients["member-1"]
	if _, err := client.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "planted", metav1.GetOptions{}); err == nil {
		t.Error("the ConfigMap was written into kube-system")
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Get(t.Context(), "planted-admin", metav1.GetOptions{}); err == nil {
		t.Error("the ClusterRoleBinding was created")
	}
	if n := eventCount(t, f.hub, v1alpha1.KindCluster, "default", "member-1", v1alpha1.ReasonRefusedByMemberPolicy); n < 2 {
		t.Errorf("%d %s events on the Cluster, want one per refused Work", n, v1alpha1.ReasonRefusedByMemberPolicy)
	}
	// The Deployment in the refused Work applied.
	f.waitDeploymentsOf("shop", "decoy", map[string]int32{"member-1": 1}, "shop:1")
	ns, err := client.CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "baseline" {
		t.Errorf("namespace shop: %v, labels %v; want Pod Security baseline", err, ns.GetLabels())
	}
	checkShopRunning(t, f)

	// The member's owner lists the kind: the agent restarts with it.
	if err := f.agents["member-1"].Stop(); err != nil {
		t.Fatal(err)
	}
	c := f.env.Clusters()[0]
	f.agents["member-1"] = startAgent(t, f.hub, c, "--member-policy-cluster-scoped=rbac.authorization.k8s.io/ClusterRoleBinding")
	waitFor(t, 30*time.Second, "the ClusterRoleBinding applied", func() (bool, string) {
		w := workOf(t, f.hub, "member-1", "ClusterRoleBinding", "planted-admin")
		cond := workApplied(w)
		return cond != nil && cond.Status == metav1.ConditionTrue, describeWork(w)
	})
	if _, err := client.RbacV1().ClusterRoleBindings().Get(t.Context(), "planted-admin", metav1.GetOptions{}); err != nil {
		t.Errorf("the listed ClusterRoleBinding: %v", err)
	}
	if w := workOf(t, f.hub, "member-1", "ConfigMap", "planted"); workApplied(w) == nil || workApplied(w).Reason != v1alpha1.ReasonRefusedByMemberPolicy {
		t.Errorf("kube-system is still refused: %s", describeWork(w))
	}
	checkShopRunning(t, f)
}

// shopDeployment is a Deployment of one replica in namespace shop.
func shopDeployment(name string) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name, "namespace": "shop"},
		"spec": map[string]any{"replicas": int64(1), "selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
				"tolerations": []any{map[string]any{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}},
				"containers":  []any{map[string]any{"name": name, "image": "shop:1"}}}}}}
}

func manifest(t *testing.T, obj map[string]any) v1alpha1.Manifest {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return v1alpha1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}
}

// waitRefused waits for the Work of kind/name to be refused by the member
// policy, with a message naming the object and the rule and an event.
func waitRefused(t *testing.T, f *fleet, kind, name string) *v1alpha1.Work {
	t.Helper()
	var w *v1alpha1.Work
	waitFor(t, 30*time.Second, kind+" refused by the member policy", func() (bool, string) {
		w = workOf(t, f.hub, "member-1", kind, name)
		cond := workApplied(w)
		return cond != nil && cond.Reason == v1alpha1.ReasonRefusedByMemberPolicy, describeWork(w)
	})
	msg := workApplied(w).Message
	rule := map[string]string{"ConfigMap": "memberPolicy.namespaces.deny", "ClusterRoleBinding": "memberPolicy.clusterScoped.allow"}[kind]
	if !strings.Contains(msg, name) || !strings.Contains(msg, rule) {
		t.Errorf("%s: message %q names neither the object nor the rule %s", kind, msg, rule)
	}
	waitFor(t, 10*time.Second, "an event on the Work", func() (bool, string) {
		n := eventCount(t, f.hub, v1alpha1.KindWork, w.Namespace, w.Name, v1alpha1.ReasonRefusedByMemberPolicy)
		return n > 0, fmt.Sprintf("%d events", n)
	})
	return w
}

// checkShopRunning: the well-behaved Deployment is Available and its Work
// applied.
func checkShopRunning(t *testing.T, f *fleet) {
	t.Helper()
	f.waitDeploymentsOf("shop", "shop", map[string]int32{"member-1": 2}, "shop:1")
	if w := workOf(t, f.hub, "member-1", "Deployment", "shop"); workApplied(w) == nil || workApplied(w).Status != metav1.ConditionTrue {
		t.Errorf("the well-behaved Work: %s", describeWork(w))
	}
}

// watchesSecrets: a rule of the role lists or watches Secrets.
func watchesSecrets(t *testing.T, o *unstructured.Unstructured) bool {
	t.Helper()
	var r rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(r.Rules, func(rule rbacv1.PolicyRule) bool {
		return slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") &&
			(slices.Contains(rule.Verbs, "list") || slices.Contains(rule.Verbs, "watch"))
	})
}

// TestAgentChartMemberPolicy checks what the agent chart renders for the
// member policy: the agent's flags, RBAC without cluster-wide list/watch
// when namespaces are restricted, and clear errors for bad values.
func TestAgentChartMemberPolicy(t *testing.T) {
	render := func(t *testing.T, sets ...string) ([]*unstructured.Unstructured, error) {
		out, err := renderChart(t, "charts/flotilla-agent", "flotilla-agent", "flotilla-system", append(slices.Clone(agentTestValues), sets...))
		if err != nil {
			return nil, err
		}
		return decodeManifests(t, out), nil
	}
	args := func(t *testing.T, objs []*unstructured.Unstructured) []string {
		for _, o := range objs {
			if o.GetKind() == "Deployment" {
				ctrs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				a, _, _ := unstructured.NestedStringSlice(ctrs[0].(map[string]any), "args")
				return a
			}
		}
		t.Fatal("no Deployment")
		return nil
	}
	t.Run("defaults", func(t *testing.T) {
		objs, err := render(t)
		if err != nil {
			t.Fatal(err)
		}
		a := args(t, objs)
		for flag, want := range map[string]string{"--member-policy-deny-namespaces": "kube-system,kube-public,kube-node-lease",
			"--member-policy-cluster-scoped": "", "--pod-security-enforce": "baseline", "--member-policy-allow-namespaces": ""} {
			if got := argValue(a, flag); got != want {
				t.Errorf("%s=%q, want %q", flag, got, want)
			}
		}
	})
	t.Run("kinds", func(t *testing.T) {
		objs, err := render(t, "memberPolicy.clusterScoped.allow[0].group=rbac.authorization.k8s.io", "memberPolicy.clusterScoped.allow[0].kind=ClusterRole",
			"memberPolicy.clusterScoped.allow[1].kind=Namespace", "memberPolicy.kinds.deny[0].kind=Secret")
		if err != nil {
			t.Fatal(err)
		}
		a := args(t, objs)
		if got := argValue(a, "--member-policy-cluster-scoped"); got != "rbac.authorization.k8s.io/ClusterRole,Namespace" {
			t.Errorf("--member-policy-cluster-scoped=%q", got)
		}
		if got := argValue(a, "--member-policy-deny-kinds"); got != "Secret" {
			t.Errorf("--member-policy-deny-kinds=%q", got)
		}
	})
	t.Run("namespaces in RBAC: the policy's, no cluster-wide list or watch", func(t *testing.T) {
		objs, err := render(t, "rbac.workloads.namespaces={web,shop}")
		if err != nil {
			t.Fatal(err)
		}
		if got := argValue(args(t, objs), "--member-policy-allow-namespaces"); got != "web,shop" {
			t.Errorf("--member-policy-allow-namespaces=%q, want web,shop", got)
		}
		for _, o := range objs {
			if o.GetKind() == "ClusterRole" && watchesSecrets(t, o) {
				t.Errorf("ClusterRole %s lists or watches Secrets cluster-wide", o.GetName())
			}
			if o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-workloads") && !hasVerb(t, o, "watch") {
				t.Errorf("Role %s/%s grants no watch", o.GetNamespace(), o.GetName())
			}
		}
	})
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"allow outside the RBAC namespaces", []string{"rbac.workloads.namespaces={web}", "memberPolicy.namespaces.allow={web,other}"}, []string{`"other" is not in rbac.workloads.namespaces`}},
		{"bad namespace", []string{"memberPolicy.namespaces.deny={Kube_System}"}, []string{"/memberPolicy/namespaces/deny/0"}},
		{"bad kind", []string{"memberPolicy.clusterScoped.allow[0].kind=Cluster Role"}, []string{"/memberPolicy/clusterScoped/allow/0/kind"}},
		{"kind without kind", []string{"memberPolicy.clusterScoped.allow[0].group=rbac.authorization.k8s.io"}, []string{"/memberPolicy/clusterScoped/allow/0", "kind"}},
		{"bad level", []string{"memberPolicy.podSecurity.enforce=strict"}, []string{"/memberPolicy/podSecurity/enforce"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.sets...)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("render error %v, want %q", err, want)
				}
			}
		})
	}
}
