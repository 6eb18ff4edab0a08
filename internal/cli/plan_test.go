package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

const (
	planPolicy = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinity: {clusterNames: [member-1, member-2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member-1]}, weight: 1}
          - {targetCluster: {clusterNames: [member-2]}, weight: 2}
`
	planTemplate = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: default}
spec:
  replicas: 3
  template: {spec: {containers: [{name: nginx, image: nginx, resources: {requests: {cpu: 100m}}}]}}
`
	planClusters = `apiVersion: v1
kind: List
items:
  - apiVersion: flotilla.io/v1alpha1
    kind: Cluster
    metadata: {name: member-1}
    spec: {region: eu}
  - apiVersion: flotilla.io/v1alpha1
    kind: Cluster
    metadata: {name: member-2}
    spec: {region: eu}
  - apiVersion: flotilla.io/v1alpha1
    kind: Cluster
    metadata: {name: member-3}
    spec: {region: us}
`
	planPrevious = `apiVersion: flotilla.io/v1alpha1
kind: ResourceBinding
metadata: {name: nginx-deployment, namespace: default}
spec:
  resource: {apiVersion: apps/v1, kind: Deployment, name: nginx, namespace: default}
  replicas: 3
  clusters: [{name: member-1, replicas: 1}, {name: member-2, replicas: 2}]
`
)

func planFiles(t *testing.T, extra map[string]string) {
	t.Helper()
	files := map[string]string{"policy.yaml": planPolicy, "nginx.yaml": planTemplate, "clusters.yaml": planClusters, "binding.yaml": planPrevious}
	for k, v := range extra {
		files[k] = v
	}
	inDir(t, files)
}

var planArgs = []string{"plan", "--policy", "policy.yaml", "--template", "nginx.yaml", "--clusters", "clusters.yaml"}

func TestPlanJSONIsTheBindingTheHubWouldWrite(t *testing.T) {
	planFiles(t, nil)
	r := runEnv(t, nil, append(planArgs, "-o", "json")...)
	wantExit(t, r, 0)
	var b v1alpha1.ResourceBinding
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-1", Replicas: 1}, {Name: "member-2", Replicas: 2}}, b.Spec.Clusters); diff != "" {
		t.Errorf("spec.clusters (-want +got):\n%s", diff)
	}
	if b.Kind != "ResourceBinding" || b.Name != "nginx-deployment" || b.Spec.Replicas != 3 || b.Spec.ReplicaRequirements.ResourceRequest.Cpu().String() != "100m" {
		t.Errorf("binding %s %s replicas %d requirements %v", b.Kind, b.Name, b.Spec.Replicas, b.Spec.ReplicaRequirements)
	}
}

func TestPlanTables(t *testing.T) {
	tests := []struct {
		name  string
		extra []string
		want  string
	}{
		{"replicas from the template", nil, "CLUSTER REPLICAS\nmember-1 1\nmember-2 2\n"},
		{"replicas overridden", []string{"--replicas", "9"}, "CLUSTER REPLICAS\nmember-1 3\nmember-2 6\n"},
		{"-o table is the default", []string{"-o", "table"}, "CLUSTER REPLICAS\nmember-1 1\nmember-2 2\n"},
		{"what if member-1 failed", []string{"--previous", "binding.yaml", "--what-if-fail", "member-1"},
			"CLUSTER REPLICAS PREVIOUS\nmember-2 3 2\nmember-1 failed 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planFiles(t, nil)
			r := runEnv(t, nil, append(slicesClone(planArgs), tt.extra...)...)
			wantExit(t, r, 0)
			if got := squeeze(r.stdout); strings.TrimSpace(got) != strings.TrimSpace(tt.want) {
				t.Errorf("table:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestPlanUnschedulableExitsOne(t *testing.T) {
	planFiles(t, map[string]string{"clusters.yaml": strings.ReplaceAll(planClusters, "spec: {region: eu}",
		"spec: {region: eu, taints: [{key: cluster.flotilla.io/unreachable, effect: NoSchedule}]}")})
	r := runEnv(t, nil, planArgs...)
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, "unschedulable") || !strings.Contains(r.stderr, "untolerated taint") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout of an unschedulable plan: %q", r.stdout)
	}
}

func TestPlanBadInput(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		args  []string
		code  int
		want  string
	}{
		{"missing --clusters", nil, []string{"plan", "--policy", "policy.yaml", "--template", "nginx.yaml"}, 2, "--clusters is required"},
		{"invalid policy", map[string]string{"policy.yaml": strings.Replace(planPolicy, "Divided", "Split", 1)}, planArgs, 1,
			"policy.yaml: document 1 (PropagationPolicy nginx-propagation): spec.placement.replicaScheduling.replicaSchedulingType"},
		{"not a policy", map[string]string{"policy.yaml": planTemplate}, planArgs, 1, "apiVersion \"apps/v1\""},
		{"unknown failed cluster", nil, append(slicesClone(planArgs), "--what-if-fail", "member-9"), 2, "--what-if-fail member-9"},
		{"a cluster file with a Deployment", map[string]string{"clusters.yaml": planTemplate}, planArgs, 1, "want Cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planFiles(t, tt.files)
			r := runEnv(t, nil, tt.args...)
			wantExit(t, r, tt.code)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.want)
			}
		})
	}
}

func TestPlanPreviousBindingsEvictionTasksCount(t *testing.T) {
	evicting := planPrevious + `  gracefulEvictionTasks: [{fromCluster: member-1, reason: TaintUntolerated, producer: TaintManager}]
`
	planFiles(t, map[string]string{"evicting.yaml": evicting})
	r := runEnv(t, nil, append(slicesClone(planArgs), "--previous", "evicting.yaml", "-o", "json")...)
	wantExit(t, r, 0)
	var b v1alpha1.ResourceBinding
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, b.Spec.Clusters); diff != "" {
		t.Errorf("spec.clusters with member-1 being evicted (-want +got):\n%s", diff)
	}
}

// TestPlanTiesByTemplateUID: 5 replicas over two clusters of equal weight
// tie; as on the hub (and in Karmada), the template's UID decides which
// one gets the third: Karmada's test UIDs, whose FNV-1a hash is odd (the
// higher name) and even (the lower). The template's own UID counts, else
// the --previous binding's spec.resource.uid.
func TestPlanTiesByTemplateUID(t *testing.T) {
	const odd, even = "d43fdeeb-d750-4e2b-bee3-64eb94534f4c", "4858ca61-3ff8-4095-8267-f3d059d8074c"
	equal := strings.Replace(planPolicy, "weight: 2", "weight: 1", 1)
	template := func(uid string) string {
		s := strings.Replace(planTemplate, "replicas: 3", "replicas: 5", 1)
		if uid != "" {
			s = strings.Replace(s, "namespace: default}", "namespace: default, uid: "+uid+"}", 1)
		}
		return s
	}
	previous := strings.Replace(planPrevious, "namespace: default}\n  replicas", "namespace: default, uid: "+odd+"}\n  replicas", 1)
	lower := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 3}, {Name: "member-2", Replicas: 2}}
	higher := []v1alpha1.TargetCluster{{Name: "member-1", Replicas: 2}, {Name: "member-2", Replicas: 3}}
	tests := []struct {
		name     string
		template string
		args     []string
		uid      types.UID
		want     []v1alpha1.TargetCluster
	}{
		{"no UID: the lower name", template(""), nil, "", lower},
		{"odd template UID: the higher name", template(odd), nil, odd, higher},
		{"even template UID: the lower name", template(even), nil, even, lower},
		{"the previous binding's UID", template(""), []string{"--previous", "previous.yaml"}, odd, higher},
		{"the template's UID first", template(even), []string{"--previous", "previous.yaml"}, even, lower},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planFiles(t, map[string]string{"policy.yaml": equal, "nginx.yaml": tt.template, "previous.yaml": previous})
			r := runEnv(t, nil, append(slicesClone(planArgs), append(tt.args, "-o", "json")...)...)
			wantExit(t, r, 0)
			var b v1alpha1.ResourceBinding
			if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			if diff := cmp.Diff(tt.want, b.Spec.Clusters); diff != "" {
				t.Errorf("spec.clusters (-want +got):\n%s", diff)
			}
			if b.Spec.Resource.UID != tt.uid {
				t.Errorf("spec.resource.uid %q, want %q", b.Spec.Resource.UID, tt.uid)
			}
		})
	}
}

// TestPlanOverflowTiers: a plan with overflowAffinities says which group
// and which tiers took the replicas, and why.
func TestPlanOverflowTiers(t *testing.T) {
	const policy = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinities:
      - affinityName: gpu
        clusterNames: [gpu-1]
      - affinityName: idc
        clusterNames: [idc-1, idc-2]
        overflowAffinities:
          - {affinityName: cloud, clusterNames: [cloud-1]}
          - {affinityName: spare, clusterNames: [spare-1]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
`
	cluster := func(name string, pods int) string {
		return fmt.Sprintf(`  - apiVersion: flotilla.io/v1alpha1
    kind: Cluster
    metadata: {name: %s}
    status: {resourceSummary: {allocatable: {pods: "%d", cpu: "64"}}}
`, name, pods)
	}
	clusters := "apiVersion: v1\nkind: List\nitems:\n" + cluster("gpu-1", 1) + cluster("idc-1", 3) + cluster("idc-2", 3) + cluster("cloud-1", 10) + cluster("spare-1", 10)
	tests := []struct {
		name     string
		replicas string
		want     string
		extra    []string
	}{
		{"the primary tier holds them", "4", `CLUSTER REPLICAS TIER
idc-1 2 idc
idc-2 2 idc

Affinity group: idc
group gpu passed over: 0/1 clusters have room: need 4 replicas, 1 available (gpu-1: 1)
tier idc: 4 replicas in 2 clusters with room for 6
overflow tier cloud: 0 replicas in 1 cluster with room for 10 (not needed)
overflow tier spare: 0 replicas in 1 cluster with room for 10 (not needed)
`, nil},
		{"overflow to the first tier with room", "10", `CLUSTER REPLICAS TIER
cloud-1 4 cloud
idc-1 3 idc
idc-2 3 idc

Affinity group: idc
group gpu passed over: 0/1 clusters have room: need 10 replicas, 1 available (gpu-1: 1)
tier idc: 6 replicas in 2 clusters with room for 6
overflow tier cloud: 4 replicas in 1 cluster with room for 10 (idc full)
overflow tier spare: 0 replicas in 1 cluster with room for 10 (not needed)
`, nil},
		{"overflow on to the last tier", "18", `CLUSTER REPLICAS TIER
cloud-1 10 cloud
idc-1 3 idc
idc-2 3 idc
spare-1 2 spare

Affinity group: idc
group gpu passed over: 0/1 clusters have room: need 18 replicas, 1 available (gpu-1: 1)
tier idc: 6 replicas in 2 clusters with room for 6
overflow tier cloud: 10 replicas in 1 cluster with room for 10 (idc full)
overflow tier spare: 2 replicas in 1 cluster with room for 10 (idc full, cloud full)
`, nil},
		{"the first group holds it", "1", `CLUSTER REPLICAS
gpu-1 1

Affinity group: gpu
`, nil},
		{"what if the primary tier failed", "4", `CLUSTER REPLICAS TIER
cloud-1 4 cloud
idc-1 failed -
idc-2 failed -

Affinity group: idc
group gpu passed over: 0/1 clusters have room: need 4 replicas, 1 available (gpu-1: 1)
tier idc: no cluster fits
overflow tier cloud: 4 replicas in 1 cluster with room for 10 (idc without a cluster that fits)
overflow tier spare: 0 replicas in 1 cluster with room for 10 (not needed)
`, []string{"--what-if-fail", "idc-1", "--what-if-fail", "idc-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planFiles(t, map[string]string{"policy.yaml": policy, "clusters.yaml": clusters})
			r := runEnv(t, nil, append(append(slicesClone(planArgs), "--replicas", tt.replicas), tt.extra...)...)
			wantExit(t, r, 0)
			if got := squeeze(r.stdout); got != squeeze(tt.want) {
				t.Errorf("plan:\n%s\nwant:\n%s", r.stdout, tt.want)
			}
		})
	}
}
