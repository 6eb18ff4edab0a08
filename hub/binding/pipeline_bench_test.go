package binding_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/store"
)

// BenchmarkPipeline measures the hub's side of propagation without agents:
// 1,000 Deployments applied at once over 3 clusters, until every binding is
// scheduled and every Work exists. It reports bindings/s and Works/s.
func BenchmarkPipeline(b *testing.B) {
	const bindings, clusters = 1000, 3
	for range b.N {
		b.StopTimer()
		p := startPipeline(b, "member1", "member2", "member3")
		p.apply(weighted2)
		var items []json.RawMessage
		for i := range bindings {
			items = append(items, json.RawMessage(fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"app-%05d","namespace":"default","labels":{"bench":"yes"}},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, i)))
		}
		b.StartTimer()
		start := time.Now()
		for from := 0; from < bindings; from += 500 {
			if _, err := p.objs.Apply(b.Context(), items[from:from+500], "", false); err != nil {
				b.Fatal(err)
			}
		}
		works := 0
		for works < bindings*clusters {
			ev := <-p.works
			if ev.Type == store.Added {
				works++
			}
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(bindings)/elapsed.Seconds(), "bindings/s")
		b.ReportMetric(float64(bindings*clusters)/elapsed.Seconds(), "works/s")
	}
}

const weighted2 = `apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: bench, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {bench: "yes"}}}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2, member3]}
    replicaScheduling: {replicaSchedulingType: Divided}`
