package binding_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/binding"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/detector"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/hub/scheduling"
	"github.com/flotilla-io/flotilla/store"
)

// pipeline runs the detector, the scheduling and the binding controllers
// on a real embedded store, as the hub does.
type pipeline struct {
	t     testing.TB
	objs  *objects.Objects
	works <-chan store.Event[*v1alpha1.Work]
}

func startPipeline(t testing.TB, clusters ...string) *pipeline {
	t.Helper()
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects.New(s)
	for _, name := range clusters {
		if _, err := objs.Clusters.Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { detector.New(objs, logger).Run(ctx, 2); done <- struct{}{} }()
	go func() {
		scheduling.New(objs, controller.NewInformer(objs.Clusters, nil, logger), controller.DiscardRecorder{}, clock.RealClock{}, logger).Run(ctx, 2)
		done <- struct{}{}
	}()
	go func() { binding.New(objs, clock.RealClock{}, logger).Run(ctx, 2); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
		s.Close()
	})
	return &pipeline{t: t, objs: objs, works: objs.Works.Watch(ctx, "", 0)}
}

func (p *pipeline) apply(docs ...string) {
	p.t.Helper()
	var raw []json.RawMessage
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			p.t.Fatal(err)
		}
		raw = append(raw, j)
	}
	if _, err := p.objs.Apply(p.t.Context(), raw, "", false); err != nil {
		p.t.Fatal(err)
	}
}

// replicasIn reads spec.replicas of the Work's manifest.
func replicasIn(t testing.TB, w *v1alpha1.Work) int64 {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

// awaitWorks waits until the live Works (not being deleted) have exactly
// the wanted replicas per cluster, and the Works marked for deletion are
// exactly those of the clusters in wantDead.
func (p *pipeline) awaitWorks(want map[string]int64, wantDead ...string) {
	p.t.Helper()
	live, dead := map[string]*v1alpha1.Work{}, map[string]bool{}
	deadWanted := map[string]bool{}
	for _, c := range wantDead {
		deadWanted[c] = true
	}
	timeout := time.After(15 * time.Second)
	for {
		got := map[string]int64{}
		for cluster, w := range live {
			got[cluster] = replicasIn(p.t, w)
		}
		if cmp.Equal(want, got) && cmp.Equal(deadWanted, dead) {
			return
		}
		select {
		case ev := <-p.works:
			cluster := strings.TrimPrefix(ev.Object.Namespace, v1alpha1.ExecutionNamespacePrefix)
			delete(live, cluster)
			delete(dead, cluster)
			switch {
			case ev.Type == store.Deleted:
			case ev.Object.DeletionTimestamp != nil:
				dead[cluster] = true
			default:
				live[cluster] = ev.Object
			}
		case <-timeout:
			p.t.Fatalf("Works per cluster: want %v and tombstones %v, have %v and %v", want, wantDead, got, dead)
		}
	}
}

const (
	nginx = `apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx, namespace: default}
spec:
  replicas: 3
  template: {spec: {containers: [{name: nginx, image: nginx:1.27}]}}`
	weighted = `apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: nginx-propagation, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: nginx}]
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - {targetCluster: {clusterNames: [member1]}, weight: 1}
          - {targetCluster: {clusterNames: [member2]}, weight: 2}`
)

func TestSeedExampleBecomesWorks(t *testing.T) {
	p := startPipeline(t, "member1", "member2", "member3")
	p.apply(nginx, weighted)
	p.awaitWorks(map[string]int64{"member1": 1, "member2": 2})

	b, err := p.objs.Bindings.Get(t.Context(), "default", "nginx-deployment")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]v1alpha1.TargetCluster{{Name: "member1", Replicas: 1}, {Name: "member2", Replicas: 2}}, b.Spec.Clusters); diff != "" {
		t.Errorf("spec.clusters (-want +got):\n%s", diff)
	}

	p.apply(strings.Replace(nginx, "replicas: 3", "replicas: 9", 1))
	p.awaitWorks(map[string]int64{"member1": 3, "member2": 6})

	// Moving the placement to member3 leaves tombstones where it was.
	p.apply(strings.Replace(strings.Replace(weighted, "clusterNames: [member1, member2]", "clusterNames: [member3]", 1),
		"clusterNames: [member1]}", "clusterNames: [member3]}", 1))
	p.awaitWorks(map[string]int64{"member3": 9}, "member1", "member2")
}

// awaitWork waits until the live Work of cluster satisfies ok. seen holds
// the last live Work of each cluster, so events of other clusters read
// meanwhile are not lost.
func (p *pipeline) awaitWork(seen map[string]*v1alpha1.Work, cluster, what string, ok func(*v1alpha1.Work) bool) *v1alpha1.Work {
	p.t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		if w := seen[cluster]; w != nil && ok(w) {
			return w
		}
		select {
		case ev := <-p.works:
			c := strings.TrimPrefix(ev.Object.Namespace, v1alpha1.ExecutionNamespacePrefix)
			if ev.Type == store.Deleted || ev.Object.DeletionTimestamp != nil {
				delete(seen, c)
			} else {
				seen[c] = ev.Object
			}
		case <-timeout:
			p.t.Fatalf("Work of %s: timed out waiting for %s; last seen: %+v", cluster, what, seen[cluster])
		}
	}
}

func stopAfter(w *v1alpha1.Work) int32 {
	if w.Spec.Fencing == nil {
		return 0
	}
	return w.Spec.Fencing.StopAfterSeconds
}

// The policy's fencing setting rides on the Works; changing it is a new
// generation, so the agents learn of it.
func TestFencingRidesOnTheWorks(t *testing.T) {
	p := startPipeline(t, "member1", "member2")
	withFencing := func(seconds string) string {
		return weighted + "\n  failover: {cluster: {fencing: {stopAfterSeconds: " + seconds + "}}}"
	}
	p.apply(nginx, withFencing("60"))
	seen := map[string]*v1alpha1.Work{}
	first := p.awaitWork(seen, "member1", "fencing 60s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 60 })
	p.awaitWork(seen, "member2", "fencing 60s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 60 })

	p.apply(withFencing("120"))
	second := p.awaitWork(seen, "member1", "fencing 120s", func(w *v1alpha1.Work) bool { return stopAfter(w) == 120 })
	if second.Generation != first.Generation+1 {
		t.Errorf("generation %d after the fencing change, want %d", second.Generation, first.Generation+1)
	}

	p.apply(weighted)
	third := p.awaitWork(seen, "member1", "no fencing", func(w *v1alpha1.Work) bool { return w.Spec.Fencing == nil })
	if third.Generation != second.Generation+1 {
		t.Errorf("generation %d after fencing was dropped, want %d", third.Generation, second.Generation+1)
	}
	if replicasIn(t, third) != 1 {
		t.Errorf("member1 Work has %d replicas, want 1", replicasIn(t, third))
	}
}
