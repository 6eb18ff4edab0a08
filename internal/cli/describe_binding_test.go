package cli

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestDescribeBinding(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "in failover",
			args: []string{"describe", "binding", "nginx-deployment", "-n", "shop"},
			want: `Name:                 nginx-deployment
Namespace:            shop
Labels:               <none>
Created:              {{created}}
Resource:             apps/v1 Deployment shop/nginx
Replicas:             3
Last Scheduled:       2026-05-01T11:58:00Z (2m ago)
Placement:
  Cluster Affinity:   names=member1,member2,member3
  Tolerations:        cluster.flotilla.io/unreachable:NoExecute op=Exists for 60s
  Spread Constraints: <none>
  Replica Scheduling: Divided/Weighted
  Weights:            names=member1: 2
                      names=member2,member3: 1
Conditions:
  TYPE           STATUS   REASON     AGE   MESSAGE
  Scheduled      True     Success    2m    binding is scheduled
  FullyApplied   False    Applying   90s   member2 is applying
Clusters:
  CLUSTER   REPLICAS   APPLIED   HEALTH    STATUS
  member1   2          True      Healthy   readyReplicas=2 replicas=2
  member2   1          False     Unknown   waiting for the agent
  member3   1          True      Healthy   evicting (TaintUntolerated, 2m ago)
Eviction Tasks:
  FROM      AGE   PURGE        REASON             BY             WAITING FOR
  member3   2m    Gracefully   TaintUntolerated   TaintManager   member2 not applied yet; grace period ends in 8m0s
Preserved State:
  FROM      OBSERVED   BEFORE FAILOVER           LABELS
  member3   3m ago     member1,member2,member3   example.com/ready=1,example.com/revision=nginx-7d4b9
Works:
  CLUSTER   NAME                        GENERATION   ACKED   APPLIED   DELETING
  member1   nginx-deployment-1a2b3c4d   3            3       True      no
  member2   nginx-deployment-5e6f7a8b   3            2       False     no
  member3   nginx-deployment-9c0d1e2f   2            2       True      yes
Events:
  TYPE      REASON            AGE   COUNT   MESSAGE
  Normal    Scheduled         3h    1       scheduled to member1:2, member2:1
  Warning   EvictionStarted   2m    1       cluster member3 is unreachable
`,
		},
		{
			name: "cluster binding of a kind without replicas",
			args: []string{"describe", "clusterbinding", "shop-namespace"},
			want: `Name:                 shop-namespace
Labels:               <none>
Created:              {{created}}
Resource:             v1 Namespace shop
Replicas:             0
Last Scheduled:       -
Placement:            <none>
Conditions:
  TYPE           STATUS   REASON                AGE   MESSAGE
  Scheduled      True     Success               24h
  FullyApplied   True     FullyAppliedSuccess   24h
Clusters:
  CLUSTER   REPLICAS   APPLIED   HEALTH    STATUS
  member1   -          True      Healthy   -
  member2   -          True      Healthy   -
Works:
  CLUSTER   NAME                      GENERATION   ACKED   APPLIED   DELETING
  member1   shop-namespace-0f1e2d3c   1            -       -         no
Events:
  TYPE     REASON      AGE   COUNT   MESSAGE
  Normal   Scheduled   24h   1       scheduled to member1, member2
`,
		},
		{
			name: "unschedulable, namespace default",
			args: []string{"describe", "rb", "web-deployment"},
			want: `Name:                 web-deployment
Namespace:            default
Labels:               <none>
Created:              {{created}}
Resource:             apps/v1 Deployment default/web
Replicas:             1
Last Scheduled:       -
Placement:            <none>
Conditions:
  TYPE        STATUS   REASON          AGE   MESSAGE
  Scheduled   False    Unschedulable   10m   0/3 clusters fit
Clusters:             <none>
Works:                <none>
Events:               <none>
`,
		},
	}
	h := newWorkloadHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 0)
			want := strings.Replace(tt.want, "{{created}}", created(h.creationOf(t, tt.args[1], namespaceArg(tt.args), tt.args[2])), 1)
			if diff := cmp.Diff(want, r.stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// namespaceArg is the -n of args, else default.
func namespaceArg(args []string) string {
	if i := slices.Index(args, "-n"); i >= 0 {
		return args[i+1]
	}
	return "default"
}

// creationOf is when the API server created a binding (kind binding or
// rb) or cluster binding.
func (h *testHub) creationOf(t *testing.T, kind, ns, name string) metav1.Time {
	t.Helper()
	var (
		m   metav1.Object
		err error
	)
	if kind == "clusterbinding" || kind == "crb" {
		m, err = h.Flotilla.FlotillaV1alpha1().ClusterResourceBindings().Get(t.Context(), name, metav1.GetOptions{})
	} else {
		m, err = h.Flotilla.FlotillaV1alpha1().ResourceBindings(ns).Get(t.Context(), name, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return m.GetCreationTimestamp()
}

// describe reads the binding, the Works of every cluster and the events
// the API selects with a field selector.
func TestDescribeBindingRequests(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{
			args: []string{"describe", "binding", "nginx-deployment", "-n", "shop"},
			want: []string{
				"GET /apis/flotilla.io/v1alpha1/namespaces/shop/resourcebindings/nginx-deployment",
				"GET /apis/flotilla.io/v1alpha1/works",
				"GET /api/v1/namespaces/shop/events?fieldSelector=" + url.QueryEscape(
					"involvedObject.kind=ResourceBinding,involvedObject.name=nginx-deployment,involvedObject.namespace=shop"),
			},
		},
		{
			args: []string{"describe", "crb", "shop-namespace"},
			want: []string{
				"GET /apis/flotilla.io/v1alpha1/clusterresourcebindings/shop-namespace",
				"GET /apis/flotilla.io/v1alpha1/works",
				"GET /api/v1/events?fieldSelector=" + url.QueryEscape(
					"involvedObject.kind=ClusterResourceBinding,involvedObject.name=shop-namespace"),
			},
		},
	}
	h := newWorkloadHub(t)
	for _, tt := range tests {
		t.Run(tt.args[1], func(t *testing.T) {
			before := len(h.sent())
			wantExit(t, h.run(t, tt.args...), 0)
			if diff := cmp.Diff(tt.want, h.sent()[before:]); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeBindingErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"not found", []string{"describe", "binding", "nginx-deployment"}, 1,
			"error: resourcebindings.flotilla.io \"nginx-deployment\" not found\n"},
		{"missing name", []string{"describe", "binding"}, 2,
			"error: missing the name of the binding\nSee 'flotilla describe --help' for usage.\n"},
		{"nothing", []string{"describe"}, 2,
			"error: missing the resource type and name; supported types: cluster, binding, clusterbinding, workloadrebalancer\nSee 'flotilla describe --help' for usage.\n"},
		{"bad namespace", []string{"describe", "rb", "x", "-n", "a_b"}, 2,
			"error: invalid namespace \"a_b\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\nSee 'flotilla describe --help' for usage.\n"},
	}
	h := newWorkloadHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, tt.wantCode)
			if diff := cmp.Diff(tt.want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDescribePlacementOverflowTiers: describe lists each group's
// overflow tiers under it, in order, and marks the group in use.
func TestDescribePlacementOverflowTiers(t *testing.T) {
	p := &v1alpha1.Placement{
		ClusterAffinities: []v1alpha1.ClusterAffinityTerm{
			{AffinityName: "idc", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"idc-1", "idc-2"}},
				OverflowAffinities: []v1alpha1.OverflowClusterAffinity{
					{AffinityName: "cloud", ClusterAffinity: v1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"site": "cloud"}}}},
					{AffinityName: "spare", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"spare-1"}}},
				}},
			{AffinityName: "backup", ClusterAffinity: v1alpha1.ClusterAffinity{ClusterNames: []string{"backup-1"}}},
		},
		ReplicaScheduling: &v1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: v1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: v1alpha1.ReplicaDivisionPreferenceAggregated},
	}
	d := &describeWriter{}
	d.placement(p, "idc")
	var out strings.Builder
	if err := d.flush(&out); err != nil {
		t.Fatal(err)
	}
	want := `Placement:
  Cluster Affinities: idc (in use): names=idc-1,idc-2
                        overflow tier cloud: labels=site=cloud
                        overflow tier spare: names=spare-1
                      backup: names=backup-1
  Tolerations:        <none>
  Spread Constraints: <none>
  Replica Scheduling: Divided/Aggregated
  Weights:            <none>
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
}
