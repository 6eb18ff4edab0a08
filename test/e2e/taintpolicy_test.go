package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// karmadaTaintPolicies are two Karmada ClusterTaintPolicies as their users
// write them: a taint of one's own while member-2's API server is
// unhealthy, and Karmada's documented NoExecute on a cluster not Ready.
const karmadaTaintPolicies = `
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: api-degraded
spec:
  targetClusters:
    clusterNames: [member-2]
  addOnConditions:
    - {conditionType: APIServerHealthy, operator: In, statusValues: ["False"]}
  removeOnConditions:
    - {conditionType: APIServerHealthy, operator: In, statusValues: ["True"]}
  taints:
    - {key: example.com/api-degraded, effect: NoSchedule}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: detect-cluster-notready
spec:
  addOnConditions:
    - {conditionType: Ready, operator: NotIn, statusValues: ["True"]}
  removeOnConditions:
    - {conditionType: Ready, operator: In, statusValues: ["True"]}
  taints:
    - {key: cluster.karmada.io/not-ready, effect: NoExecute}
`

// TestClusterTaintPolicy: on a hub run as Karmada 1.14 runs
// (--health-no-execute-taints=false), Karmada's ClusterTaintPolicies
// applied as written taint a real member cluster whose API server is
// stopped (its agent lives): the hub adds not-ready:NoSchedule, the
// policies their own taint and not-ready:NoExecute, the Cluster records
// which policy added which, and events name the policy; when the API
// server is back, the removeOnConditions take the taints away. The other
// cluster is never touched.
func TestClusterTaintPolicy(t *testing.T) {
	env := membercluster.StartForTest(t, membercluster.Specs(2)...)
	h := startHub(t, "--health-no-execute-taints=false")
	member2 := env.Cluster("member-2")
	for _, c := range env.Clusters() {
		startAgent(t, h, c)
	}
	for _, name := range []string{"member-1", "member-2"} {
		waitReady(t, h, name, 30*time.Second)
	}
	waitFor(t, 10*time.Second, "member-2's APIServerHealthy and NodesReady conditions", func() (bool, string) {
		c := h.cluster(t, "member-2")
		api := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionAPIServerHealthy)
		nodes := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ClusterConditionNodesReady)
		return api != nil && api.Status == metav1.ConditionTrue && nodes != nil && nodes.Status == metav1.ConditionTrue,
			fmt.Sprintf("%+v", c.Status.Conditions)
	})

	dyn := dynamic.NewForConfigOrDie(h.restConfig(t))
	karmada := schema.GroupVersionResource{Group: "policy.karmada.io", Version: "v1alpha1", Resource: "clustertaintpolicies"}
	for _, doc := range strings.Split(karmadaTaintPolicies, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(karmada).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
	}
	twins := v1alpha1.SchemeGroupVersion.WithResource("clustertaintpolicies")
	waitFor(t, 10*time.Second, "the policies' flotilla.io twins", func() (bool, string) {
		list, err := dyn.Resource(twins).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 2, fmt.Sprintf("%d twins", len(list.Items))
	})

	if err := member2.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	const owners = `{"cluster.flotilla.io/not-ready:NoExecute":"detect-cluster-notready","example.com/api-degraded:NoSchedule":"api-degraded"}`
	waitFor(t, 30*time.Second, "member-2 tainted by the hub and the policies", func() (bool, string) {
		c := h.cluster(t, "member-2")
		return readyOf(c) == metav1.ConditionFalse && hasTaint(c, v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule) &&
				hasTaint(c, v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute) && hasTaint(c, "example.com/api-degraded", corev1.TaintEffectNoSchedule) &&
				c.Annotations[v1alpha1.AnnotationTaintPolicies] == owners,
			describe(c) + " owners " + c.Annotations[v1alpha1.AnnotationTaintPolicies]
	})
	waitFor(t, 10*time.Second, "events naming the policies", func() (bool, string) {
		var events corev1.EventList
		h.getJSON(t, "/api/v1/events?fieldSelector="+url.QueryEscape("involvedObject.kind=Cluster,involvedObject.name=member-2,reason=TaintClusterSucceed"), &events)
		var messages []string
		for _, ev := range events.Items {
			messages = append(messages, ev.Message)
		}
		all := strings.Join(messages, "\n")
		return strings.Contains(all, "ClusterTaintPolicy api-degraded added taint example.com/api-degraded:NoSchedule to cluster member-2") &&
			strings.Contains(all, "ClusterTaintPolicy detect-cluster-notready added taint cluster.flotilla.io/not-ready:NoExecute to cluster member-2"), all
	})

	if err := member2.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, h, "member-2", 30*time.Second) // Ready, and no taint left
	if c := h.cluster(t, "member-2"); c.Annotations[v1alpha1.AnnotationTaintPolicies] != "" {
		t.Errorf("member-2's taint owners after recovery: %q, want none", c.Annotations[v1alpha1.AnnotationTaintPolicies])
	}
	if c := h.cluster(t, "member-1"); len(c.Spec.Taints) != 0 || readyOf(c) != metav1.ConditionTrue {
		t.Errorf("member-1 was touched: %s", describe(c))
	}
}
