package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
)

const nginxPolicyYAML = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
`

func deploymentYAML(replicas string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
spec:
  replicas: ` + replicas + `
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
`
}

// applies is the applies flotilla sent that were not dry runs.
func (h *testHub) applies() []string {
	var out []string
	requests, _ := h.sentMatching(http.MethodPatch, "/")
	for _, r := range requests {
		if !strings.Contains(r, "dryRun=All") {
			out = append(out, r)
		}
	}
	return out
}

// Steps run in order against one hub: each apply sees what the ones
// before it stored.
func TestApplyActions(t *testing.T) {
	h := newHub(t)
	ns := h.Namespace(t)
	const newNS = "apply-shop"
	t.Cleanup(func() { h.deleteNamespaceNow(t, newNS) })
	inDir(t, map[string]string{
		"app.yaml":    deploymentYAML("3") + "---\n" + nginxPolicyYAML,
		"scaled.yaml": deploymentYAML("5") + "---\n" + nginxPolicyYAML,
		"cm.yaml":     configMap("extra"),
		"ns.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + newNS + "\n",
	})
	steps := []struct {
		name         string
		args         []string
		wantStdout   string
		wantApplies  int
		wantReplicas int64 // of the Deployment afterwards
	}{
		{
			name: "create", args: []string{"-f", "app.yaml", "-n", ns},
			wantStdout:  "deployment.apps/nginx created\npropagationpolicy.flotilla.io/nginx-propagation created\n",
			wantApplies: 2, wantReplicas: 3,
		},
		{
			name: "apply again", args: []string{"-f", "app.yaml", "-n", ns},
			wantStdout:  "deployment.apps/nginx unchanged\npropagationpolicy.flotilla.io/nginx-propagation unchanged\n",
			wantApplies: 2, wantReplicas: 3,
		},
		{
			name: "dry run stores nothing", args: []string{"-f", "scaled.yaml", "-f", "cm.yaml", "--dry-run", "-n", ns},
			wantStdout: "deployment.apps/nginx configured (dry run)\n" +
				"propagationpolicy.flotilla.io/nginx-propagation unchanged (dry run)\nconfigmap/extra created (dry run)\n",
			wantReplicas: 3,
		},
		{
			name: "configure", args: []string{"-f", "scaled.yaml", "-n", ns},
			wantStdout:  "deployment.apps/nginx configured\npropagationpolicy.flotilla.io/nginx-propagation unchanged\n",
			wantApplies: 2, wantReplicas: 5,
		},
		{
			name: "dry run of objects in a namespace the input creates", args: []string{"-f", "cm.yaml,ns.yaml", "-n", newNS, "--dry-run"},
			wantStdout: "configmap/extra created (dry run; not checked by the hub: its namespace is created by this run)\n" +
				"namespace/" + newNS + " created (dry run)\n",
			wantReplicas: 5,
		},
		{
			name: "the namespace first, then what is in it", args: []string{"-f", "cm.yaml,ns.yaml", "-n", newNS},
			wantStdout:  "configmap/extra created\nnamespace/" + newNS + " created\n",
			wantApplies: 2, wantReplicas: 5,
		},
	}
	for _, step := range steps {
		before := len(h.applies())
		r := h.run(t, append([]string{"apply"}, step.args...)...)
		wantExit(t, r, 0)
		if diff := cmp.Diff(step.wantStdout, r.stdout); diff != "" {
			t.Errorf("%s: stdout (-want +got):\n%s", step.name, diff)
		}
		if applies := h.applies()[before:]; len(applies) != step.wantApplies {
			t.Errorf("%s: applies %q, want %d", step.name, applies, step.wantApplies)
		}
		d, err := h.Kube.AppsV1().Deployments(ns).Get(context.Background(), "nginx", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if *d.Spec.Replicas != int32(step.wantReplicas) {
			t.Errorf("%s: replicas %d, want %d", step.name, *d.Spec.Replicas, step.wantReplicas)
		}
	}
	// The Karmada policy is stored as Flotilla's, owned by flotilla.
	p, err := h.Flotilla.FlotillaV1alpha1().PropagationPolicies(ns).Get(context.Background(), "nginx-propagation", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.ResourceSelectors[0].Name != "nginx" || p.ManagedFields[0].Manager != "flotilla" || p.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("policy %+v, managed fields %+v", p.Spec.ResourceSelectors, p.ManagedFields)
	}
	if _, err := h.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry run stored configmap extra: %v", err)
	}
	if _, err := h.Kube.CoreV1().ConfigMaps(newNS).Get(context.Background(), "extra", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap extra in %s: %v", newNS, err)
	}
}

// deleteNamespaceNow deletes namespace ns and its ConfigMaps, and
// finalizes it (no namespace controller runs here).
func (h *testHub) deleteNamespaceNow(t *testing.T, ns string) {
	ctx := context.Background()
	if err := h.Kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete configmaps of %s: %v", ns, err)
	}
	namespaces := h.Kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Errorf("delete namespace %s: %v", ns, err)
		return
	}
	got, err := namespaces.Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Errorf("namespace %s: %v", ns, err)
		return
	}
	got.Spec.Finalizers = nil
	if _, err := namespaces.Finalize(ctx, got, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("finalize namespace %s: %v", ns, err)
	}
}

// The hub's refusals in the dry run point back at the file and document of
// each object, whether it came alone or in a List, and nothing is applied.
func TestApplyRejected(t *testing.T) {
	h := newHub(t)
	ns := h.Namespace(t)
	noKind := strings.Replace(nginxPolicyYAML, "    kind: Deployment\n", "", 1)
	inDir(t, map[string]string{
		"policy.yaml": deploymentYAML("3") + "---\n" + noKind,
		"more.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: fine}
- apiVersion: flotilla.io/v1alpha1
  kind: ClusterPropagationPolicy
  metadata: {name: everywhere}
  spec:
    placement: {replicaScheduling: {replicaSchedulingType: Divided}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: Fine}
`,
	})
	r := h.run(t, "apply", "-f", "policy.yaml", "-f", "more.yaml", "-n", ns)
	wantExit(t, r, 1)
	want := `error: the hub found 3 problems; nothing was applied:
  policy.yaml: document 2 (PropagationPolicy nginx-propagation): spec.resourceSelectors[0].kind: Required value
  more.yaml: document 1, item 2 (ClusterPropagationPolicy everywhere): spec.resourceSelectors: Required value
  more.yaml: document 1, item 3 (ConfigMap Fine): metadata.name: Invalid value: "Fine": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if applies := h.applies(); len(applies) != 0 || r.stdout != "" {
		t.Errorf("applied %q, printed %q; want neither", applies, r.stdout)
	}
	if _, err := h.Kube.AppsV1().Deployments(ns).Get(context.Background(), "nginx", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the valid Deployment was stored: %v", err)
	}
}

// What the hub cannot take is found before anything is written: kinds it
// does not serve, namespaces it lacks, a namespace on a cluster-scoped
// kind, the same object twice.
func TestApplyUnknownToTheHub(t *testing.T) {
	h := newHub(t)
	ns := h.Namespace(t)
	inDir(t, map[string]string{
		"a.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\n---\n" + configMap("elsewhere") + "  namespace: nowhere\n",
		"b.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, namespace: " + ns + "}\n---\n" + configMap("twice") + "---\n" + configMap("twice"),
	})
	r := h.run(t, "apply", "-f", "a.yaml,b.yaml", "-n", ns)
	wantExit(t, r, 1)
	want := `error: the hub found 4 problems; nothing was applied:
  a.yaml: document 1 (Widget w1): kind: Not found: "Widget": the hub serves no kind Widget in example.com/v1 (apply its CustomResourceDefinition first?)
  b.yaml: document 1 (Namespace x): metadata.namespace: Forbidden: Namespace is cluster-scoped
  b.yaml: document 3 (ConfigMap twice): metadata.name: Duplicate value: "twice" (the same object as b.yaml: document 2 (ConfigMap twice))
  a.yaml: document 2 (ConfigMap elsewhere): metadata.namespace: Not found: "nowhere": no such namespace on the hub; create it first, or apply a Namespace document with the objects
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if writes := h.writes(); len(writes) != 0 {
		t.Errorf("sent %q, want no write", writes)
	}
}

// Flotilla's own kinds other than policies and rebalancers are no
// templates: refused before anything is sent.
func TestApplyHubKinds(t *testing.T) {
	h := newHub(t)
	inDir(t, map[string]string{"a.yaml": "apiVersion: flotilla.io/v1alpha1\nkind: Cluster\nmetadata: {name: c}\n---\n" +
		"apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {name: o}\n---\n" +
		"apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: r}\n---\n" +
		"apiVersion: apps.karmada.io/v1alpha1\nkind: WorkloadRebalancer\nmetadata: {name: ok}\n"})
	r := h.run(t, "apply", "-f", "a.yaml")
	wantExit(t, r, 1)
	want := `error: 3 problems in the input; nothing was sent to the hub:
  a.yaml: document 1 (Cluster c): kind: Unsupported value: "Cluster": supported values: "PropagationPolicy", "ClusterPropagationPolicy", "ClusterTaintPolicy"
  a.yaml: document 2 (OverridePolicy o): kind: Unsupported value: "OverridePolicy": supported values: "PropagationPolicy", "ClusterPropagationPolicy", "ClusterTaintPolicy"
  a.yaml: document 3 (ResourceRegistry r): apiVersion: Forbidden: the hub's own kinds are not propagated as templates
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if sent := h.sent(); len(sent) != 0 {
		t.Errorf("sent %q, want no request", sent)
	}
}

// A Karmada WorkloadRebalancer is applied as Flotilla's.
func TestApplyKarmadaRebalancer(t *testing.T) {
	h := newHub(t)
	inDir(t, map[string]string{"rb.yaml": `apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata: {name: demo}
spec:
  workloads: [{apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: web}]
`})
	r := h.run(t, "apply", "-f", "rb.yaml")
	wantExit(t, r, 0)
	if r.stdout != "workloadrebalancer.apps.flotilla.io/demo created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	rb, err := h.Flotilla.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), "demo", metav1.GetOptions{})
	if err != nil || rb.Spec.Workloads[0].Name != "nginx" {
		t.Errorf("stored %+v, %v", rb, err)
	}
}

// Karmada's ClusterTaintPolicy is applied as Flotilla's.
func TestApplyKarmadaTaintPolicy(t *testing.T) {
	h := newHub(t)
	inDir(t, map[string]string{"ctp.yaml": `apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata: {name: detect-cluster-notready}
spec:
  addOnConditions: [{conditionType: Ready, operator: NotIn, statusValues: ["True"]}]
  taints: [{key: cluster.karmada.io/not-ready, effect: NoExecute}]
`})
	r := h.run(t, "apply", "-f", "ctp.yaml")
	wantExit(t, r, 0)
	if r.stdout != "clustertaintpolicy.flotilla.io/detect-cluster-notready created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	p, err := h.Flotilla.FlotillaV1alpha1().ClusterTaintPolicies().Get(context.Background(), "detect-cluster-notready", metav1.GetOptions{})
	if err != nil || p.Spec.Taints[0].Key != "cluster.karmada.io/not-ready" {
		t.Errorf("stored %+v, %v", p, err)
	}
}

// Fields another field manager owns are not taken over: a conflict found
// by the dry run stops everything; one that appears between the dry run
// and the apply (another writer got in) fails that object only.
func TestApplyConflicts(t *testing.T) {
	h := newHub(t)
	ns := h.Namespace(t)
	other := func(name, value string) {
		t.Helper()
		cm := applycorev1.ConfigMap(name, ns).WithData(map[string]string{"key": value})
		if _, err := h.Kube.CoreV1().ConfigMaps(ns).Apply(context.Background(), cm, metav1.ApplyOptions{FieldManager: "other"}); err != nil {
			t.Fatal(err)
		}
	}
	other("taken", "theirs")
	inDir(t, map[string]string{
		"a.yaml": configMap("taken") + "data: {key: mine}\n---\n" + configMap("free") + "data: {key: mine}\n",
		"b.yaml": configMap("raced") + "data: {key: mine}\n---\n" + configMap("calm") + "data: {key: mine}\n",
	})
	r := h.run(t, "apply", "-f", "a.yaml", "-n", ns)
	wantExit(t, r, 1)
	want := `error: the hub found 1 problem; nothing was applied:
  a.yaml: document 1 (ConfigMap taken): Apply failed with 1 conflict: conflict with "other": .data.key (fields another field manager owns: change them with that manager, or leave them out of the document)
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if applies := h.applies(); len(applies) != 0 {
		t.Errorf("applied %q after a conflict in the dry run", applies)
	}

	// Another writer takes raced's field after the dry run.
	h.setAnswered(func(req *http.Request, _ *http.Response) {
		if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/configmaps/raced") && strings.Contains(req.URL.RawQuery, "dryRun") {
			other("raced", "theirs")
		}
	})
	r = h.run(t, "apply", "-f", "b.yaml", "-n", ns)
	wantExit(t, r, 1)
	if r.stdout != "configmap/calm created\n" {
		t.Errorf("stdout = %q, want calm created", r.stdout)
	}
	want = `error: 1 of 2 objects not applied:
  b.yaml: document 1 (ConfigMap raced): Apply failed with 1 conflict: conflict with "other": .data.key (fields another field manager owns: change them with that manager, or leave them out of the document)
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

// A CRD and its objects in one run: the objects are checked and applied
// once the CRD is served.
func TestApplyCRDWithItsObjects(t *testing.T) {
	h := newHub(t)
	ns := h.Namespace(t)
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		if err := h.Dynamic.Resource(crd).Delete(context.Background(), "gadgets.cli.example.com", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD: %v", err)
		}
	})
	inDir(t, map[string]string{"gadgets.yaml": `apiVersion: cli.example.com/v1
kind: Gadget
metadata: {name: g1}
spec: {size: 3}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.cli.example.com}
spec:
  group: cli.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
`})
	r := h.run(t, "apply", "-f", "gadgets.yaml", "-n", ns, "--dry-run")
	wantExit(t, r, 0)
	want := "gadget.cli.example.com/g1 created (dry run; not checked by the hub: its CustomResourceDefinition is applied by this run)\n" +
		"customresourcedefinition.apiextensions.k8s.io/gadgets.cli.example.com created (dry run)\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	r = h.run(t, "apply", "-f", "gadgets.yaml", "-n", ns)
	wantExit(t, r, 0)
	want = "gadget.cli.example.com/g1 created\ncustomresourcedefinition.apiextensions.k8s.io/gadgets.cli.example.com created\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("apply (-want +got):\n%s", diff)
	}
	gadget := schema.GroupVersionResource{Group: "cli.example.com", Version: "v1", Resource: "gadgets"}
	u, err := h.Dynamic.Resource(gadget).Namespace(ns).Get(context.Background(), "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size"); size != 3 {
		t.Errorf("gadget %v", u.Object)
	}
	// Applied again, both are known: nothing changes.
	r = h.run(t, "apply", "-f", "gadgets.yaml", "-n", ns)
	wantExit(t, r, 0)
	want = "gadget.cli.example.com/g1 unchanged\ncustomresourcedefinition.apiextensions.k8s.io/gadgets.cli.example.com unchanged\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("apply again (-want +got):\n%s", diff)
	}
	// Deleted, the objects first.
	r = h.run(t, "delete", "-f", "gadgets.yaml", "-n", ns)
	wantExit(t, r, 0)
	want = "gadget.cli.example.com/g1 deleted\ncustomresourcedefinition.apiextensions.k8s.io/gadgets.cli.example.com deleted\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("delete (-want +got):\n%s", diff)
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := h.Dynamic.Resource(crd).Get(ctx, "gadgets.cli.example.com", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestAnswerProblems(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		want   []string
		wantOK bool
	}{
		{
			name: "invalid: every cause with its field",
			err: apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", field.ErrorList{
				field.Invalid(field.NewPath("data"), "x", "too big"), field.Required(field.NewPath("metadata", "name"), ""),
			}),
			want:   []string{"a.yaml: document 1: data: Invalid value: \"x\": too big", "a.yaml: document 1: metadata.name: Required value"},
			wantOK: true,
		},
		{
			name:   "forbidden: the message",
			err:    apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no")),
			want:   []string{`a.yaml: document 1: configmaps "x" is forbidden: no`},
			wantOK: true,
		},
		{name: "not an answer", err: errors.New("connection refused")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			problems, ok := answerProblems("a.yaml: document 1", tt.err)
			var got []string
			for _, p := range problems {
				got = append(got, p.String())
			}
			if ok != tt.wantOK || !cmp.Equal(tt.want, got) {
				t.Errorf("answerProblems = %q, %t; want %q, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// A cause whose message repeats its field is shown with the field once.
func TestFieldMessageRepeatedField(t *testing.T) {
	if got := fieldMessage("spec", "spec: Required value"); got != "spec: Required value" {
		t.Errorf("fieldMessage = %q", got)
	}
}

func TestApplyDeleteUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"apply without -f", []string{"apply"}, "missing -f: give a file, a directory or - to read standard input"},
		{"delete without -f", []string{"delete", "-n", "shop"}, "missing -f: give a file, a directory or - to read standard input"},
		{"a file as argument", []string{"apply", "app.yaml"}, "unexpected arguments [\"app.yaml\"]: give the files with -f"},
		{"stdin twice", []string{"delete", "-f", "-", "-f", "a.yaml,-"}, "-f - given 2 times: standard input can be read only once"},
		{"empty name in -f", []string{"apply", "-f", "a.yaml,"}, "invalid -f \"\": must be a file, a directory or -"},
		{"bad namespace", []string{"apply", "-f", "-", "-n", "-x"}, "invalid namespace \"-x\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
		{"dry run is apply's", []string{"delete", "-f", "-", "--dry-run"}, "unknown flag: --dry-run"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.runStdin(t, configMap("x"), tt.args...)
			wantExit(t, r, 2)
			want := "error: " + tt.want + "\nSee 'flotilla " + tt.args[0] + " --help' for usage.\n"
			if diff := cmp.Diff(want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}
