package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx\nspec:\n  replicas: " + replicas + "\n"
}

// Steps run in order against one hub: each apply sees what the ones
// before it stored.
func TestApplyActions(t *testing.T) {
	inDir(t, map[string]string{
		"app.yaml":     deploymentYAML("3") + "---\n" + nginxPolicyYAML,
		"scaled.yaml":  deploymentYAML("5") + "---\n" + nginxPolicyYAML,
		"cm.yaml":      configMap("extra"),
		"cluster.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
	})
	hub := newFakeHub(t)
	steps := []struct {
		name        string
		args        []string
		wantStdout  string
		wantRequest string
		wantStored  []objectKey
	}{
		{
			name: "create", args: []string{"-f", "app.yaml"},
			wantStdout:  "deployment.apps/nginx created\npropagationpolicy.flotilla.io/nginx-propagation created\n",
			wantRequest: "POST " + applyPath,
			wantStored: []objectKey{
				{"apps", "Deployment", "default", "nginx"},
				{"flotilla.io", "PropagationPolicy", "default", "nginx-propagation"},
			},
		},
		{
			name: "apply again", args: []string{"-f", "app.yaml"},
			wantStdout:  "deployment.apps/nginx unchanged\npropagationpolicy.flotilla.io/nginx-propagation unchanged\n",
			wantRequest: "POST " + applyPath,
			wantStored: []objectKey{
				{"apps", "Deployment", "default", "nginx"},
				{"flotilla.io", "PropagationPolicy", "default", "nginx-propagation"},
			},
		},
		{
			name: "dry run stores nothing", args: []string{"-f", "scaled.yaml", "-f", "cm.yaml", "--dry-run"},
			wantStdout: "deployment.apps/nginx configured (dry run)\n" +
				"propagationpolicy.flotilla.io/nginx-propagation unchanged (dry run)\nconfigmap/extra created (dry run)\n",
			wantRequest: "POST " + applyPath + "?dryRun=true",
			wantStored: []objectKey{
				{"apps", "Deployment", "default", "nginx"},
				{"flotilla.io", "PropagationPolicy", "default", "nginx-propagation"},
			},
		},
		{
			name: "configure", args: []string{"-f", "scaled.yaml"},
			wantStdout:  "deployment.apps/nginx configured\npropagationpolicy.flotilla.io/nginx-propagation unchanged\n",
			wantRequest: "POST " + applyPath,
			wantStored: []objectKey{
				{"apps", "Deployment", "default", "nginx"},
				{"flotilla.io", "PropagationPolicy", "default", "nginx-propagation"},
			},
		},
		{
			name: "namespace for items without one", args: []string{"-f", "cm.yaml,cluster.yaml", "-n", "shop"},
			wantStdout:  "configmap/extra created\nnamespace/shop created\n",
			wantRequest: "POST " + applyPath + "?namespace=shop",
			wantStored: []objectKey{
				{"", "ConfigMap", "shop", "extra"},
				{"", "Namespace", "", "shop"},
				{"apps", "Deployment", "default", "nginx"},
				{"flotilla.io", "PropagationPolicy", "default", "nginx-propagation"},
			},
		},
	}
	for i, step := range steps {
		r := run(t, hub, append([]string{"apply"}, step.args...)...)
		wantExit(t, r, 0)
		if diff := cmp.Diff(step.wantStdout, r.stdout); diff != "" {
			t.Errorf("%s: stdout (-want +got):\n%s", step.name, diff)
		}
		if got := hub.sent(); len(got) != i+1 || got[i] != step.wantRequest {
			t.Errorf("%s: requests %q, want the last to be %q", step.name, got, step.wantRequest)
		}
		if diff := cmp.Diff(step.wantStored, hub.storedKeys(), cmp.AllowUnexported(objectKey{})); diff != "" {
			t.Errorf("%s: stored (-want +got):\n%s", step.name, diff)
		}
	}
}

// The hub's 422 causes point back at the file and document of each item,
// whether it came alone or in a List.
func TestApplyRejected(t *testing.T) {
	split := strings.Replace(nginxPolicyYAML, "Duplicated", "Split", 1)
	inDir(t, map[string]string{
		"policy.yaml": deploymentYAML("3") + "---\n" + split,
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
    resourceSelectors: [{apiVersion: v1, kind: Namespace}]
    placement: {replicaScheduling: {replicaSchedulingType: Spread}}
`,
	})
	hub := newFakeHub(t)
	r := run(t, hub, "apply", "-f", "policy.yaml", "-f", "more.yaml")
	wantExit(t, r, 1)
	want := `error: the hub found 2 problems; nothing was applied:
  policy.yaml: document 2 (PropagationPolicy nginx-propagation): spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Split": supported values: "Duplicated", "Divided"
  more.yaml: document 1, item 2 (ClusterPropagationPolicy everywhere): spec.placement.replicaScheduling.replicaSchedulingType: Unsupported value: "Spread": supported values: "Duplicated", "Divided"
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if len(hub.sentPosts()) != 1 || len(hub.storedKeys()) != 0 || r.stdout != "" {
		t.Errorf("sent %d POSTs, stored %v, printed %q; want 1 POST and nothing stored or printed",
			len(hub.sentPosts()), hub.storedKeys(), r.stdout)
	}
}

func TestExplainRejection(t *testing.T) {
	manifests := []manifest{
		{origin: origin{source: "a.yaml", doc: 1}, kind: "Deployment", name: "nginx"},
		{origin: origin{source: "b.yaml", doc: 3, item: 2}, kind: "ConfigMap", name: "x"},
	}
	items := field.NewPath("items")
	tests := []struct {
		name string
		errs field.ErrorList
		want string
	}{
		{
			name: "field of an item",
			errs: field.ErrorList{field.Invalid(items.Index(1).Child("data"), "x", "too big")},
			want: "b.yaml: document 3, item 2 (ConfigMap x): data: Invalid value: \"x\": too big",
		},
		{
			name: "the item itself",
			errs: field.ErrorList{field.Forbidden(items.Index(0), "kind is served by the hub itself")},
			want: "a.yaml: document 1 (Deployment nginx): Forbidden: kind is served by the hub itself",
		},
		{
			name: "an item the request did not have",
			errs: field.ErrorList{field.Required(items.Index(7).Child("kind"), "")},
			want: "items[7].kind: Required value",
		},
		{
			name: "not about an item",
			errs: field.ErrorList{field.TooMany(items, 9000, 5000)},
			want: "items: Too many: 9000: must have at most 5000 items",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apierrors.NewInvalid(schema.GroupKind{Kind: "List"}, "", tt.errs)
			got := explainRejection(err, manifests, "nothing was applied").Error()
			want := "the hub found 1 problem; nothing was applied:\n  " + tt.want
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// A cause whose message repeats its field (as err.Error() would) is shown
// with the field once.
func TestExplainRejectionRepeatedField(t *testing.T) {
	err := apierrors.NewInvalid(schema.GroupKind{Kind: "List"}, "", nil)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: metav1.CauseTypeFieldValueRequired, Field: "items[0].spec", Message: "items[0].spec: Required value",
	})
	got := explainRejection(err, []manifest{{origin: origin{source: "-", doc: 1}}}, "nothing was applied").Error()
	if want := "the hub found 1 problem; nothing was applied:\n  -: document 1: spec: Required value"; got != want {
		t.Errorf("error = %q, want %q", got, want)
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newFakeHub(t)
			r := runStdin(t, hub, configMap("x"), tt.args...)
			wantExit(t, r, 2)
			want := "error: " + tt.want + "\nSee 'flotilla " + tt.args[0] + " --help' for usage.\n"
			if diff := cmp.Diff(want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if sent := hub.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}
