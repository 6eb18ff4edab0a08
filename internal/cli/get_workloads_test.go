package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestGetWorkloadTables(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "policies of namespace default",
			args: []string{"get", "policies"},
			want: `NAME   PRIORITY   SELECTORS                     SCHEDULING   AGE
web    0          apps/v1/Deployment[app=web]   Duplicated   0s
`,
		},
		{
			name: "policies of every namespace",
			args: []string{"get", "pp", "-A"},
			want: `NAMESPACE   NAME                PRIORITY   SELECTORS                                          SCHEDULING         AGE
default     web                 0          apps/v1/Deployment[app=web]                        Duplicated         0s
shop        nginx-propagation   10         apps/v1/Deployment/nginx,v1/ConfigMap/nginx-conf   Divided/Weighted   0s
`,
		},
		{
			name: "one policy, long name",
			args: []string{"get", "propagationpolicy", "nginx-propagation", "--namespace", "shop"},
			want: `NAME                PRIORITY   SELECTORS                                          SCHEDULING         AGE
nginx-propagation   10         apps/v1/Deployment/nginx,v1/ConfigMap/nginx-conf   Divided/Weighted   0s
`,
		},
		{
			name: "cluster policies: -n does not apply, selectors are shortened",
			args: []string{"get", "cpp", "-n", "shop"},
			want: `NAME         PRIORITY   SELECTORS                                                          SCHEDULING           AGE
everything   0          v1/Namespace/shop,apps/v1/Deployment/shop/*,v1/ConfigMap,+2 more   Divided/Aggregated   0s
`,
		},
		{
			name: "bindings of a namespace",
			args: []string{"get", "bindings", "-n", "shop"},
			want: `NAME               RESOURCE           REPLICAS   SCHEDULED   APPLIED   CLUSTERS              AGE
nginx-deployment   Deployment/nginx   3          True        False     member1:2,member2:1   0s
`,
		},
		{
			name: "bindings of every namespace, wide",
			args: []string{"get", "rb", "-A", "-o", "wide"},
			want: `NAMESPACE   NAME               RESOURCE           REPLICAS   SCHEDULED       APPLIED   CLUSTERS              AGE   EVICTIONS   HEALTH
default     web-deployment     Deployment/web     1          Unschedulable   -         <none>                0s    0           <none>
shop        nginx-deployment   Deployment/nginx   3          True            False     member1:2,member2:1   0s    1           member1:Healthy,member2:Unknown,member3:Healthy
`,
		},
		{
			name: "cluster bindings",
			args: []string{"get", "clusterresourcebindings"},
			want: `NAME             RESOURCE         REPLICAS   SCHEDULED   APPLIED   CLUSTERS          AGE
shop-namespace   Namespace/shop   0          True        True      member1,member2   0s
`,
		},
		{
			name: "works of every cluster",
			args: []string{"get", "works"},
			want: `CLUSTER   NAME                        BINDING                    GENERATION   ACKED   APPLIED   DELETING   AGE
member1   nginx-deployment-1a2b3c4d   shop/nginx-deployment      3            3       True      no         0s
member1   shop-namespace-0f1e2d3c     shop-namespace             1            -       -         no         0s
member2   nginx-deployment-5e6f7a8b   shop/nginx-deployment      3            2       False     no         0s
member2   nginx-deployment-77aa88bb   default/nginx-deployment   1            1       True      no         0s
member3   nginx-deployment-9c0d1e2f   shop/nginx-deployment      2            2       True      yes        0s
`,
		},
		{
			name: "works of one cluster",
			args: []string{"get", "works", "--cluster", "member1"},
			want: `NAME                        BINDING                 GENERATION   ACKED   APPLIED   DELETING   AGE
nginx-deployment-1a2b3c4d   shop/nginx-deployment   3            3       True      no         0s
shop-namespace-0f1e2d3c     shop-namespace          1            -       -         no         0s
`,
		},
		{
			name: "one work, by execution namespace",
			args: []string{"get", "work", "nginx-deployment-9c0d1e2f", "-n", "flotilla-es-member3"},
			want: `NAME                        BINDING                 GENERATION   ACKED   APPLIED   DELETING   AGE
nginx-deployment-9c0d1e2f   shop/nginx-deployment   2            2       True      yes        0s
`,
		},
		{
			name: "resource templates that have a binding, of every namespace",
			args: []string{"get", "resources"},
			want: `KIND              NAMESPACE   NAME    READY   AGE
Namespace         -           shop    -       0s
Deployment.apps   default     web     0/1     0s
Deployment.apps   shop        nginx   2/3     0s
`,
		},
		{
			name: "resource templates of one namespace",
			args: []string{"get", "resources", "-n", "shop"},
			want: `KIND              NAMESPACE   NAME    READY   AGE
Deployment.apps   shop        nginx   2/3     0s
`,
		},
		{
			name: "resource templates by name, -A accepted",
			args: []string{"get", "resource", "nginx", "-A"},
			want: `KIND              NAMESPACE   NAME    READY   AGE
Deployment.apps   shop        nginx   2/3     0s
`,
		},
	}
	h := newWorkloadHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 0)
			if diff := cmp.Diff(tt.want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetWorkloadRequests(t *testing.T) {
	const api = "GET /apis/flotilla.io/v1alpha1/"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "policies"}, api + "namespaces/default/propagationpolicies"},
		{[]string{"get", "policy", "web"}, api + "namespaces/default/propagationpolicies/web"},
		{[]string{"get", "pp", "-A"}, api + "propagationpolicies"},
		{[]string{"get", "cpp", "everything"}, api + "clusterpropagationpolicies/everything"},
		{[]string{"get", "rb", "-n", "shop"}, api + "namespaces/shop/resourcebindings"},
		{[]string{"get", "bindings", "--all-namespaces"}, api + "resourcebindings"},
		{[]string{"get", "crb", "-A"}, api + "clusterresourcebindings"},
		{[]string{"get", "works"}, api + "works"},
		{[]string{"get", "works", "-A"}, api + "works"},
		{[]string{"get", "works", "--cluster", "member2"}, api + "namespaces/flotilla-es-member2/works"},
		{[]string{"get", "leases"}, "GET /apis/coordination.k8s.io/v1/namespaces/flotilla-cluster-lease/leases"},
		{[]string{"get", "workloadrebalancers"}, "GET /apis/apps.flotilla.io/v1alpha1/workloadrebalancers"},
	}
	h := newWorkloadHub(t)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			before := len(h.sent())
			r := h.run(t, tt.args...)
			wantExit(t, r, 0)
			if diff := cmp.Diff([]string{tt.want}, h.sent()[before:]); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// get resources lists the bindings and reads the template of each; with
// -n, only the bindings of that namespace.
func TestGetResourcesRequests(t *testing.T) {
	h := newWorkloadHub(t)
	wantExit(t, h.run(t, "get", "resources", "nginx", "-n", "shop"), 0)
	var reads []string // what the hub has in namespaces, not discovery
	for _, r := range h.sent() {
		if strings.Contains(r, "/namespaces/") {
			reads = append(reads, r)
		}
	}
	want := []string{
		"GET /apis/flotilla.io/v1alpha1/namespaces/shop/resourcebindings",
		"GET /apis/apps/v1/namespaces/shop/deployments/nginx",
	}
	if diff := cmp.Diff(want, reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s\nall requests: %q", diff, h.sent())
	}
}

// -o yaml prints the hub's list as it is: the bindings table leaves most
// of it out.
func TestGetBindingsYAML(t *testing.T) {
	h := newWorkloadHub(t)
	r := h.run(t, "get", "crb", "-o", "yaml")
	wantExit(t, r, 0)
	var got v1alpha1.ClusterResourceBindingList
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &got); err != nil {
		t.Fatalf("output is not YAML of a ClusterResourceBindingList: %v\n%s", err, r.stdout)
	}
	if got.Kind != "ClusterResourceBindingList" || len(got.Items) != 1 {
		t.Fatalf("kind %q, %d items", got.Kind, len(got.Items))
	}
	want := namespaceBinding()
	ignore := cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "Generation", "CreationTimestamp")
	if diff := cmp.Diff(want, got.Items[0], ignore); diff != "" {
		t.Errorf("item (-want +got):\n%s", diff)
	}
}

func TestGetWorkloadsNoneFound(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "rb", "-n", "empty"}, "No bindings found in namespace empty.\n"},
		{[]string{"get", "works", "--cluster", "member9"}, "No works found in cluster member9.\n"},
		{[]string{"get", "resources", "-n", "empty"}, "No resources found in namespace empty.\n"},
		{[]string{"get", "crb", "-A"}, "No clusterbindings found.\n"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 0)
			if r.stdout != "" || r.stderr != tt.want {
				t.Errorf("stdout %q, stderr %q; want nothing and %q", r.stdout, r.stderr, tt.want)
			}
		})
	}
}

func TestGetWorkloadNotFound(t *testing.T) {
	r := newWorkloadHub(t).run(t, "get", "rb", "nope", "-n", "shop")
	wantExit(t, r, 1)
	if diff := cmp.Diff("error: resourcebindings.flotilla.io \"nope\" not found\n", r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}

func TestGetWorkloadUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"both -n and -A", []string{"get", "policies", "-n", "shop", "-A"}, "-n and -A exclude each other: give one namespace or all of them"},
		{"name across namespaces", []string{"get", "rb", "nginx-deployment", "-A"}, "a name needs a namespace: drop -A (and give -n if it is not default)"},
		{"--cluster of policies", []string{"get", "pp", "--cluster", "member1"}, "--cluster applies to works only, not to policies"},
		{"--cluster and -n", []string{"get", "works", "--cluster", "member1", "-n", "flotilla-es-member1"}, "--cluster picks the namespace of the works: drop -n and -A"},
		{"work without cluster", []string{"get", "work", "nginx-deployment-1a2b3c4d"}, "a Work is named within its cluster: give --cluster"},
		{"bad namespace", []string{"get", "rb", "-n", "Shop"}, "invalid namespace \"Shop\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
		{"bad cluster", []string{"get", "works", "--cluster", ".."}, "invalid name \"..\": may not be '..'"},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 2)
			want := "error: " + tt.want + "\nSee 'flotilla get --help' for usage.\n"
			if diff := cmp.Diff(want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}
