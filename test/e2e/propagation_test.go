package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/karmada"
	hubstats "github.com/flotilla-io/flotilla/hub/stats"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// The seed example: nginx with 3 replicas, divided 1:2 over member-1 and
// member-2 by static weights.
const (
	nginxYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: web
  labels: {app: nginx}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
          resources: {requests: {cpu: 100m, memory: 64Mi}}
`
	policyYAML = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: web
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member-1, member-2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster: {clusterNames: [member-1]}
            weight: 1
          - targetCluster: {clusterNames: [member-2]}
            weight: 2
`
	configYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: web-config, namespace: web}
data: {greeting: hello}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: config-everywhere, namespace: web}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: web-config}]
  placement: {clusterAffinity: {clusterNames: [member-1, member-2]}}
`
)

// fleet is a hub with agents on real member clusters, and clients of them.
type fleet struct {
	t       *testing.T
	hub     *hub
	env     *membercluster.Environment
	agents  map[string]*agent
	clients map[string]kubernetes.Interface
	dir     string
}

// startFleet starts member clusters, a hub (with extra flags) and an
// agent per cluster, and waits until every cluster is Ready.
func startFleet(t *testing.T, clusters int, hubFlags ...string) *fleet {
	t.Helper()
	return startFleetAgents(t, clusters, nil, hubFlags...)
}

// startFleetAgents is startFleet with extra flags for every agent.
func startFleetAgents(t *testing.T, clusters int, agentFlags []string, hubFlags ...string) *fleet {
	t.Helper()
	return startFleetPrepared(t, clusters, nil, agentFlags, hubFlags...)
}

// startFleetPrepared is startFleetAgents that calls prepare (if not nil)
// on each member cluster before its agent starts: what is installed then
// is in the served APIs the agent first reports.
func startFleetPrepared(t *testing.T, clusters int, prepare func(*membercluster.Cluster), agentFlags []string, hubFlags ...string) *fleet {
	t.Helper()
	f := &fleet{t: t, env: membercluster.StartForTest(t, membercluster.Specs(clusters)...), hub: startHub(t, hubFlags...),
		agents: map[string]*agent{}, clients: map[string]kubernetes.Interface{}, dir: t.TempDir()}
	for _, c := range f.env.Clusters() {
		if prepare != nil {
			prepare(c)
		}
		f.agents[c.Name] = startAgent(t, f.hub, c, agentFlags...)
		client, err := c.Clientset()
		if err != nil {
			t.Fatal(err)
		}
		f.clients[c.Name] = client
	}
	for _, c := range f.env.Clusters() {
		waitReady(t, f.hub, c.Name, 30*time.Second)
	}
	return f
}

// apply writes the documents to a file and runs flotilla apply -f on it.
func (f *fleet) apply(name, docs string) string {
	f.t.Helper()
	ensureNamespaces(f.t, f.hub, docs)
	return mustFlotilla(f.t, f.hub, "apply", "-f", f.writeFile(name, docs))
}

// writeFile writes a file in the fleet's folder and returns its path.
func (f *fleet) writeFile(name, content string) string {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// deployment reads a Deployment from a member cluster; nil if absent.
func (f *fleet) deployment(cluster, namespace, name string) *appsv1.Deployment {
	f.t.Helper()
	d, err := f.clients[cluster].AppsV1().Deployments(namespace).Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("get deployment in %s: %v", cluster, err)
	}
	return d
}

func available(d *appsv1.Deployment) bool {
	if d == nil || d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.ReadyReplicas == ptr.Deref(d.Spec.Replicas, 1) && d.Status.UpdatedReplicas == ptr.Deref(d.Spec.Replicas, 1)
		}
	}
	return false
}

func deploymentState(d *appsv1.Deployment) string {
	if d == nil {
		return "<absent>"
	}
	return fmt.Sprintf("replicas=%d ready=%d image=%s available=%v", ptr.Deref(d.Spec.Replicas, 1), d.Status.ReadyReplicas,
		d.Spec.Template.Spec.Containers[0].Image, available(d))
}

// waitDeployments waits until each cluster runs web/nginx available with
// the wanted replicas and image.
func (f *fleet) waitDeployments(want map[string]int32, image string) {
	f.t.Helper()
	f.waitDeploymentsOf("web", "nginx", want, image)
}

// waitDeploymentsOf waits until each cluster of want runs namespace/name
// available with the wanted replicas (and image, unless "").
func (f *fleet) waitDeploymentsOf(namespace, name string, want map[string]int32, image string) {
	f.t.Helper()
	waitFor(f.t, 60*time.Second, fmt.Sprintf("%s/%s %v with %q", namespace, name, want, image), func() (bool, string) {
		var states []string
		ok := true
		for cluster, replicas := range want {
			d := f.deployment(cluster, namespace, name)
			states = append(states, cluster+": "+deploymentState(d))
			ok = ok && d != nil && available(d) && *d.Spec.Replicas == replicas &&
				(image == "" || d.Spec.Template.Spec.Containers[0].Image == image)
		}
		return ok, strings.Join(states, "; ")
	})
}

// template reads a template and its status from the hub.
func (f *fleet) template(kind, namespace, name string) *unstructured.Unstructured {
	f.t.Helper()
	var u unstructured.Unstructured
	if f.hub.getJSON(f.t, templatePath(kind, namespace, name), &u) != http.StatusOK { // Unstructured keeps integers int64
		return nil
	}
	return &u
}

func (f *fleet) binding(namespace, name string) *v1alpha1.ResourceBinding {
	f.t.Helper()
	var b v1alpha1.ResourceBinding
	if f.hub.getJSON(f.t, "/apis/flotilla.io/v1alpha1/namespaces/"+namespace+"/resourcebindings/"+name, &b) != http.StatusOK {
		return nil
	}
	return &b
}

func (f *fleet) stats() hubstats.Stats {
	f.t.Helper()
	var s hubstats.Stats
	f.hub.getJSON(f.t, "/debug/stats", &s)
	return s
}

// handMade creates a Deployment in a member cluster without Flotilla.
func (f *fleet) handMade(cluster, namespace, name string) *appsv1.Deployment {
	f.t.Helper()
	ctx := f.t.Context()
	if _, err := f.clients[cluster].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:hand-made"}}}}},
	}
	created, err := f.clients[cluster].AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return created
}

// TestPropagation is the seed example end to end: apply, divide, scale,
// update, an agent away during an update, hand-made objects left alone,
// delete, and bad input refused.
func TestPropagation(t *testing.T) {
	// The member policy must list the cluster-scoped kind propagated below.
	f := startFleetAgents(t, 3, []string{"--member-policy-cluster-scoped=rbac.authorization.k8s.io/ClusterRole"})
	// Hand-made Deployments: one beside the Work's objects, one with the
	// template's own name in a cluster the policy does not select.
	besides := f.handMade("member-1", "web", "handmade")
	sameName := f.handMade("member-3", "web", "nginx")

	start := time.Now()
	out := f.apply("seed.yaml", nginxYAML+"---\n"+policyYAML)
	if !strings.Contains(out, "deployment.apps/nginx created") || !strings.Contains(out, "propagationpolicy.flotilla.io/nginx-propagation created") {
		t.Errorf("apply output:\n%s", out)
	}
	f.waitDeployments(map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")
	t.Logf("apply to Available in both clusters: %v", time.Since(start).Round(time.Millisecond))

	waitFor(t, 30*time.Second, "template status 3/3 and FullyApplied", func() (bool, string) {
		u := f.template("Deployment", "web", "nginx")
		ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
		b := f.binding("web", "nginx-deployment")
		cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionFullyApplied)
		return ready == 3 && cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprintf("readyReplicas=%d FullyApplied=%v", ready, cond)
	})
	if d := f.deployment("member-3", "web", "nginx"); d.Spec.Template.Spec.Containers[0].Image != "busybox:hand-made" {
		t.Errorf("member-3's own nginx was changed: %s", deploymentState(d))
	}

	t.Run("a cluster-scoped template goes everywhere a ClusterPropagationPolicy says", func(t *testing.T) {
		f.apply("clusterrole.yaml", `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: web-reader}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: roles}
spec:
  resourceSelectors: [{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole}]
  placement: {clusterAffinity: {clusterNames: [member-1, member-2, member-3]}}
`)
		waitFor(t, 30*time.Second, "web-reader in every member cluster", func() (bool, string) {
			missing := []string{}
			for name, client := range f.clients {
				if _, err := client.RbacV1().ClusterRoles().Get(t.Context(), "web-reader", metav1.GetOptions{}); err != nil {
					missing = append(missing, name+": "+err.Error())
				}
			}
			return len(missing) == 0, strings.Join(missing, "; ")
		})
		var crb v1alpha1.ClusterResourceBinding
		if code := f.hub.getJSON(t, "/apis/flotilla.io/v1alpha1/clusterresourcebindings/web-reader-clusterrole", &crb); code != http.StatusOK || len(crb.Spec.Clusters) != 3 {
			t.Errorf("ClusterResourceBinding: HTTP %d, clusters %v", code, crb.Spec.Clusters)
		}
	})

	t.Run("kubectl apply propagates like flotilla apply (the GitOps path)", func(t *testing.T) {
		// The seed example under another name, its Karmada policy as
		// written, applied by kubectl; the hub mirrors the policy into
		// flotilla.io. A client-go informer in another process, as a
		// GitOps tool runs.
		watch := startWatch(t, f.hub, "deployments.v1.apps", "resourcebindings.v1alpha1.flotilla.io", "works.v1alpha1.flotilla.io")
		out := mustKubectl(t, f.hub.kubeconfig(), "apply", "-f", f.writeFile("gitops.yaml", variantYAML("nginx-gitops", "")))
		for _, want := range []string{"deployment.apps/nginx-gitops created", "propagationpolicy.policy.karmada.io/nginx-gitops created"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply says no %q:\n%s", want, out)
			}
		}
		f.waitDeploymentsOf("web", "nginx-gitops", map[string]int32{"member-1": 1, "member-2": 2}, "nginx:1.27")
		var twin v1alpha1.PropagationPolicy
		if code := f.hub.getJSON(t, "/apis/flotilla.io/v1alpha1/namespaces/web/propagationpolicies/nginx-gitops", &twin); code != http.StatusOK ||
			twin.Labels[karmada.LabelMirrorOf] != crds.KarmadaPolicyGroup {
			t.Errorf("flotilla.io twin of the Karmada policy: HTTP %d, labels %v", code, twin.Labels)
		}
		for _, want := range []string{"ADDED deployments web/nginx-gitops ", "ADDED resourcebindings web/nginx-gitops-deployment ",
			"UPDATED resourcebindings web/nginx-gitops-deployment ", "UPDATED works flotilla-es-member-2/nginx-gitops-deployment-",
			"UPDATED deployments web/nginx-gitops "} {
			watch.waitLine(t, want)
		}
	})

	t.Run("describe binding shows placement, health and events", func(t *testing.T) {
		out := mustFlotilla(t, f.hub, "describe", "binding", "nginx-deployment", "-n", "web")
		for _, want := range []string{"member-1", "member-2", "Healthy", "Scheduled", "FullyApplied"} {
			if !strings.Contains(out, want) {
				t.Errorf("describe binding lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("flotilla plan, offline, agrees with the hub", func(t *testing.T) {
		clusters := filepath.Join(f.dir, "clusters.yaml")
		if err := os.WriteFile(clusters, []byte(mustFlotilla(t, f.hub, "get", "clusters", "-o", "yaml")), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, doc := range map[string]string{"plan-policy.yaml": policyYAML, "plan-nginx.yaml": nginxYAML} {
			if err := os.WriteFile(filepath.Join(f.dir, name), []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out := mustFlotilla(t, f.hub, "plan", "--policy", filepath.Join(f.dir, "plan-policy.yaml"),
			"--template", filepath.Join(f.dir, "plan-nginx.yaml"), "--clusters", clusters, "-o", "json")
		var planned v1alpha1.ResourceBinding
		if err := json.Unmarshal([]byte(out), &planned); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if hub := f.binding("web", "nginx-deployment"); !cmp.Equal(planned.Spec.Clusters, hub.Spec.Clusters) {
			t.Errorf("plan says %v, the hub placed %v", planned.Spec.Clusters, hub.Spec.Clusters)
		}
	})

	t.Run("scale to 9 divides 3 and 6", func(t *testing.T) {
		f.apply("seed.yaml", strings.Replace(nginxYAML, "replicas: 3", "replicas: 9", 1)+"---\n"+policyYAML)
		f.waitDeployments(map[string]int32{"member-1": 3, "member-2": 6}, "nginx:1.27")
	})

	t.Run("image change reaches both clusters", func(t *testing.T) {
		f.apply("seed.yaml", strings.NewReplacer("replicas: 3", "replicas: 9", "nginx:1.27", "nginx:1.28").Replace(nginxYAML)+"---\n"+policyYAML)
		f.waitDeployments(map[string]int32{"member-1": 3, "member-2": 6}, "nginx:1.28")
	})

	t.Run("an update made while an agent is away arrives on reconnect, alone", func(t *testing.T) {
		f.apply("config.yaml", configYAML)
		waitFor(t, 30*time.Second, "web-config in member-2", func() (bool, string) {
			_, err := f.clients["member-2"].CoreV1().ConfigMaps("web").Get(t.Context(), "web-config", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		// The ConfigMap exists a moment before the agent has recorded the
		// Work as applied; stopped in between, it would rightly not hold it.
		waitFor(t, 30*time.Second, "web-config's Work on member-2 Applied", func() (bool, string) {
			w := workOf(t, f.hub, "member-2", "ConfigMap", "web-config")
			return w != nil && meta.IsStatusConditionTrue(w.Status.Conditions, v1alpha1.WorkConditionApplied), describeWork(w)
		})
		if err := f.agents["member-2"].Stop(); err != nil {
			t.Fatal(err)
		}
		f.apply("seed.yaml", strings.NewReplacer("replicas: 3", "replicas: 9", "nginx:1.27", "nginx:1.29").Replace(nginxYAML)+"---\n"+policyYAML)
		f.waitDeployments(map[string]int32{"member-1": 3}, "nginx:1.29")
		if d := f.deployment("member-2", "web", "nginx"); d.Spec.Template.Spec.Containers[0].Image != "nginx:1.28" {
			t.Fatalf("member-2 changed without its agent: %s", deploymentState(d))
		}
		before := f.stats().WorksSent
		if err := f.agents["member-2"].Start(); err != nil {
			t.Fatal(err)
		}
		f.waitDeployments(map[string]int32{"member-1": 3, "member-2": 6}, "nginx:1.29")
		if sent := f.stats().WorksSent - before; sent != 1 {
			t.Errorf("on reconnect the hub sent %d Works, want 1 (only the changed nginx, not web-config)", sent)
		}
	})

	t.Run("a hub restart resends nothing and deletes nothing", func(t *testing.T) {
		before := f.deployment("member-1", "web", "nginx")
		if err := f.hub.Stop(); err != nil {
			t.Fatal(err)
		}
		f.hub.start(t)
		for name := range f.agents {
			waitReady(t, f.hub, name, 30*time.Second)
		}
		// Every agent is back with its inventory; give the controllers a
		// moment to act if they were going to (they must not).
		waitFor(t, 30*time.Second, "every binding FullyApplied after the restart", func() (bool, string) {
			b := f.binding("web", "nginx-deployment")
			cond := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BindingConditionFullyApplied)
			return cond != nil && cond.Status == metav1.ConditionTrue, fmt.Sprint(cond)
		})
		var works v1alpha1.WorkList
		f.hub.getJSON(t, "/apis/flotilla.io/v1alpha1/works", &works)
		for _, w := range works.Items {
			if w.DeletionTimestamp != nil {
				t.Errorf("Work %s/%s was marked for deletion by the restart", w.Namespace, w.Name)
			}
		}
		if st := f.stats(); st.WorksSent != 0 || st.WorkDeletesSent != 0 {
			t.Errorf("the restarted hub sent %d Works and %d deletions, want none", st.WorksSent, st.WorkDeletesSent)
		}
		if after := f.deployment("member-1", "web", "nginx"); after.Generation != before.Generation {
			t.Errorf("nginx in member-1 went from generation %d to %d over a hub restart", before.Generation, after.Generation)
		}
	})

	t.Run("bad input is refused and changes nothing", func(t *testing.T) {
		bad := filepath.Join(f.dir, "bad.yaml")
		badPolicy := strings.Replace(policyYAML, "replicaSchedulingType: Divided", "replicaSchedulingType: Split", 1)
		if err := os.WriteFile(bad, []byte(strings.Replace(nginxYAML, "replicas: 3", "replicas: 1", 1)+"---\n"+badPolicy), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := flotilla(t, f.hub, "apply", "-f", bad)
		if err == nil || !strings.Contains(out, "document 2") || !strings.Contains(out, "replicaSchedulingType") {
			t.Errorf("invalid policy: err %v, output:\n%s", err, out)
		}
		if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := flotilla(t, f.hub, "apply", "-f", bad); err == nil || !strings.Contains(out, "bad.yaml") {
			t.Errorf("invalid YAML: err %v, output:\n%s", err, out)
		}
		u := f.template("Deployment", "web", "nginx")
		if replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); replicas != 9 {
			t.Errorf("a refused apply changed the template: replicas %d", replicas)
		}
	})

	t.Run("deleting the template removes it from both clusters", func(t *testing.T) {
		mustFlotilla(t, f.hub, "delete", "-f", filepath.Join(f.dir, "seed.yaml"))
		waitFor(t, 60*time.Second, "nginx gone from member-1 and member-2, its Works gone", func() (bool, string) {
			d1, d2 := f.deployment("member-1", "web", "nginx"), f.deployment("member-2", "web", "nginx")
			var works v1alpha1.WorkList
			f.hub.getJSON(t, "/apis/flotilla.io/v1alpha1/works", &works)
			nginxWorks := 0
			for _, w := range works.Items {
				if w.Annotations["flotilla.io/binding"] == "web/nginx-deployment" {
					nginxWorks++
				}
			}
			return d1 == nil && d2 == nil && nginxWorks == 0 && len(works.Items) > 0, // web-config's Works remain
				fmt.Sprintf("member-1: %s, member-2: %s, nginx Works %d of %d", deploymentState(d1), deploymentState(d2), nginxWorks, len(works.Items))
		})
	})

	// Objects the agents did not create are exactly as they were.
	for cluster, d := range map[string]*appsv1.Deployment{"member-1": besides, "member-3": sameName} {
		now := f.deployment(cluster, d.Namespace, d.Name)
		if now == nil || now.Spec.Template.Spec.Containers[0].Image != "busybox:hand-made" || now.Labels["flotilla.io/work"] != "" {
			t.Errorf("hand-made %s/%s in %s was touched: %+v", d.Namespace, d.Name, cluster, now)
		}
	}
}

// templatePath is the API path of a template of the kinds these tests use.
func templatePath(kind, namespace, name string) string {
	switch kind {
	case "Deployment":
		return "/apis/apps/v1/namespaces/" + namespace + "/deployments/" + name
	case "ConfigMap":
		return "/api/v1/namespaces/" + namespace + "/configmaps/" + name
	}
	panic("templatePath: add kind " + kind)
}
