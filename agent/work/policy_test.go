package work

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/agent/memberpolicy"
	"github.com/flotilla-io/flotilla/protocol"
)

func clusterRoleBinding(name string) map[string]any {
	return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": "shop"}}}
}

// TestMemberPolicy runs the engine under a member policy on a real member
// cluster: refused manifests are reported and not applied, the rest of
// the Work applies and is watched in its namespace only, created
// namespaces get the Pod Security label, and nothing outside the policy
// is deleted.
func TestMemberPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	c := startCluster(t)
	policy, err := memberpolicy.Parse(memberpolicy.Settings{AllowNamespaces: []string{"shop"},
		DenyNamespaces: memberpolicy.DefaultDenyNamespaces, PodSecurity: "baseline"}, DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}

	// Before the policy: a Work with a ConfigMap in namespace legacy.
	loose := c.startEngine(t)
	loose.Upsert(upsert(t, "old", 1, configMap("old", "legacy", map[string]any{"a": "b"})))
	if a := loose.applied(t, "old", 1); !a.Applied {
		t.Fatalf("old not applied: %s", a.Message)
	}
	loose.stop(t)

	e := c.startEngineWith(t, func(cfg *Config) { cfg.Policy = policy })
	web := deployRefOf("shop", "web")
	e.Upsert(upsert(t, "mixed", 1, deployment("web", "shop", "nginx:1.27", 2),
		configMap("evil", "kube-system", map[string]any{"x": "y"}), clusterRoleBinding("evil")))
	a := e.applied(t, "mixed", 1)
	if a.Applied || a.Reason != protocol.ReasonRefusedByMemberPolicy {
		t.Fatalf("applied %v reason %q, want refused: %s", a.Applied, a.Reason, a.Message)
	}
	for i, want := range []string{"memberPolicy.namespaces.deny", "memberPolicy.clusterScoped.allow"} {
		if r := a.Manifests[i+1]; !strings.Contains(r.Message, memberpolicy.Reason) || !strings.Contains(r.Message, want) {
			t.Errorf("manifest %d message %q: want %s and %s", i+1, r.Message, memberpolicy.Reason, want)
		}
	}
	if !strings.Contains(a.Message, "2 of 3 manifests failed") {
		t.Errorf("message %q", a.Message)
	}
	e.status(t, "mixed", "the Deployment Healthy, watched in its namespace", func(st *protocol.WorkStatus) bool {
		return st.Manifests[0].Health == protocol.HealthHealthy && statusField(t, st.Manifests[0], "readyReplicas") == 2
	})
	checkLabels(t, c.mustGet(t, web), map[string]string{LabelWork: "mixed"})
	if c.get(t, cmRefOf("kube-system", "evil")) != nil {
		t.Error("the ConfigMap in kube-system was created")
	}
	if _, err := c.kube.RbacV1().ClusterRoleBindings().Get(t.Context(), "evil", metav1.GetOptions{}); err == nil {
		t.Error("the ClusterRoleBinding was created")
	}
	ns, err := c.kube.CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil || ns.Labels[memberpolicy.LabelPodSecurityEnforce] != "baseline" {
		t.Errorf("namespace shop: %v, labels %v; want Pod Security baseline", err, ns.GetLabels())
	}

	e.Delete("old")
	e.deleted(t, "old")
	if c.get(t, cmRefOf("legacy", "old")) == nil {
		t.Error("the ConfigMap outside the policy was deleted")
	}
}
