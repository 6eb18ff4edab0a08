package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// fencingYAML: solo (2 replicas) on member-1 with fencing after 3 s; free
// (1 replica) on member-1 without fencing.
const fencingYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: solo, namespace: fence}
spec:
  replicas: 2
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec: {containers: [{name: c, image: busybox:solo}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: solo, namespace: fence}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: solo}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
  failover: {cluster: {fencing: {stopAfterSeconds: 3}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: free, namespace: fence}
spec:
  replicas: 1
  selector: {matchLabels: {app: free}}
  template:
    metadata: {labels: {app: free}}
    spec: {containers: [{name: c, image: busybox:free}]}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: free, namespace: fence}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: free}]
  placement: {clusterAffinity: {clusterNames: [member-1]}}
`

// TestFencing: with the hub gone, the agent of member-1 scales the fenced
// Deployment to zero after stopAfterSeconds and leaves the other alone;
// when the hub is back, it restores the fenced one and says so on its Work.
func TestFencing(t *testing.T) {
	f := startFleet(t, 1)
	f.apply("fencing.yaml", fencingYAML)
	f.waitDeploymentsOf("fence", "solo", map[string]int32{"member-1": 2}, "")
	f.waitDeploymentsOf("fence", "free", map[string]int32{"member-1": 1}, "")
	w := workIn(f.worksOf("fence/solo-deployment"), "member-1")
	if w.Spec.Fencing == nil || w.Spec.Fencing.StopAfterSeconds != 3 {
		t.Fatalf("solo's Work carries fencing %+v, want stopAfterSeconds 3", w.Spec.Fencing)
	}
	freeGeneration := f.deployment("member-1", "fence", "free").Generation

	stopped := time.Now()
	if err := f.hub.Stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "solo scaled to zero in member-1", func() (bool, string) {
		d := f.deployment("member-1", "fence", "solo")
		return d != nil && ptr.Deref(d.Spec.Replicas, 1) == 0 && d.Status.Replicas == 0, deploymentState(d)
	})
	// The agent counts from its last acknowledged renewal: about a renew
	// interval (a quarter of the 2 s lease) before the hub stopped, two if
	// an ack was slow.
	if took := time.Since(stopped); took < 3*time.Second-2*testLeaseDuration/4 {
		t.Errorf("solo stopped %v after the hub, before its stopAfterSeconds of 3s", took.Round(time.Millisecond))
	} else {
		t.Logf("solo stopped %v after the hub", took.Round(time.Millisecond))
	}
	free := f.deployment("member-1", "fence", "free")
	if !available(free) || *free.Spec.Replicas != 1 || free.Generation != freeGeneration {
		t.Errorf("free changed during the outage: %s, generation %d (was %d)", deploymentState(free), free.Generation, freeGeneration)
	}

	f.hub.start(t)
	f.waitDeploymentsOf("fence", "solo", map[string]int32{"member-1": 2}, "")
	waitFor(t, 30*time.Second, "solo's Work marked restored", func() (bool, string) {
		w := workIn(f.worksOf("fence/solo-deployment"), "member-1")
		c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.WorkConditionFenced)
		if c == nil {
			return false, "no Fenced condition"
		}
		return c.Status == "False" && c.Reason == v1alpha1.ReasonFencedRestored, fmt.Sprintf("Fenced=%s %s: %s", c.Status, c.Reason, c.Message)
	})
	if free := f.deployment("member-1", "fence", "free"); free.Generation != freeGeneration {
		t.Errorf("free's generation moved from %d to %d", freeGeneration, free.Generation)
	}
}
