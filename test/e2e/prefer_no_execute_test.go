package e2e

import (
	"fmt"
	"testing"
	"time"
)

// preferYAML is nginx on member-1 or member-2, Duplicated: it runs on
// every cluster that fits.
const preferYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: web, labels: {app: solo}}
spec:
  replicas: 2
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec:
      containers:
        - name: solo
          image: nginx:1.27
          resources: {requests: {cpu: 100m, memory: 64Mi}}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: solo, namespace: web}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: solo}]
  placement: {clusterAffinity: {clusterNames: [member-1, member-2]}}
`

// TestPreferNoExecute: a PreferNoExecute taint on the only cluster a
// workload runs on does not evict it while no other cluster can take it
// (member-2 cordoned): an EvictionDeferred event says why and the workload
// keeps running. Once member-2 is uncordoned, the workload moves there,
// and member-1's copy goes when the replacement is healthy.
func TestPreferNoExecute(t *testing.T) {
	f := startFleet(t, 2, failoverFlags...)
	mustFlotilla(t, f.hub, "cordon", "member-2")
	f.apply("solo.yaml", preferYAML)
	f.waitDeploymentsOf("web", "solo", map[string]int32{"member-1": 2}, "")

	mustFlotilla(t, f.hub, "taint", "cluster", "member-1", "example.com/degraded:PreferNoExecute")
	waitFor(t, 30*time.Second, "an EvictionDeferred event", func() (bool, string) {
		n := eventCount(t, f.hub, "ResourceBinding", "web", "solo-deployment", "EvictionDeferred")
		return n > 0, fmt.Sprintf("%d events", n)
	})
	if b := f.binding("web", "solo-deployment"); len(b.Spec.GracefulEvictionTasks) > 0 || len(b.Spec.Clusters) != 1 || b.Spec.Clusters[0].Name != "member-1" {
		t.Fatalf("solo evicted with nowhere to go: clusters %v, tasks %v", b.Spec.Clusters, b.Spec.GracefulEvictionTasks)
	}
	if d := f.deployment("member-1", "web", "solo"); d == nil {
		t.Fatal("solo's copy on member-1 is gone")
	}

	mustFlotilla(t, f.hub, "uncordon", "member-2")
	f.waitDeploymentsOf("web", "solo", map[string]int32{"member-2": 2}, "")
	waitFor(t, 60*time.Second, "solo's member-1 copy removed once the replacement is healthy", func() (bool, string) {
		d := f.deployment("member-1", "web", "solo")
		return d == nil, deploymentState(d)
	})
	if b := f.binding("web", "solo-deployment"); len(b.Spec.Clusters) != 1 || b.Spec.Clusters[0].Name != "member-2" {
		t.Errorf("solo placed on %v, want member-2 only", b.Spec.Clusters)
	}
}
