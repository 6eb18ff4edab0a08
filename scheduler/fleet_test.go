package scheduler

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// fleetAPIs are the API lists random clusters report: none (not reported
// yet), apps and core, or core only.
var fleetAPIs = [][]v1alpha1.APIEnablement{
	nil,
	{
		{GroupVersion: "apps/v1", Resources: []v1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}},
		{GroupVersion: "v1", Resources: []v1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}},
	},
	{{GroupVersion: "v1", Resources: []v1alpha1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}}},
}

// TestScheduleWithFleet checks that a shared Fleet changes no decision:
// several random bindings over the same random clusters, scheduled at once
// from several goroutines with one Fleet, get exactly the result and error
// they get alone without one.
func TestScheduleWithFleet(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 7))
		clusters := randomInput(r).Clusters
		for _, c := range clusters {
			c.Status.APIEnablements = pick(r, fleetAPIs...)
		}
		var ins []Input
		for range 8 {
			in := randomInput(r)
			in.Clusters = clusters
			in.Previous = nil
			for _, c := range some(r, 0.3, clusters...) {
				in.Previous = append(in.Previous, v1alpha1.TargetCluster{Name: c.Name, Replicas: int32(r.IntN(8))})
			}
			in.Evicted = nil
			for _, c := range some(r, 0.1, clusters...) {
				in.Evicted = append(in.Evicted, c.Name)
			}
			kind := pick(r, [2]string{}, [2]string{"apps/v1", "Deployment"}, [2]string{"v1", "ConfigMap"})
			in.APIVersion, in.Kind = kind[0], kind[1]
			ins = append(ins, in)
		}
		fleet, err := NewFleet(clusters)
		if err != nil {
			t.Fatalf("seed %d: NewFleet: %v", seed, err)
		}
		type outcome struct {
			Result Result
			Err    string
		}
		run := func(in Input) outcome {
			res, err := Schedule(in)
			o := outcome{Result: res}
			if err != nil {
				o.Err = err.Error()
			}
			return o
		}
		shared := make([]outcome, len(ins))
		var wg sync.WaitGroup
		for i, in := range ins {
			wg.Go(func() {
				in.Fleet, in.Clusters = fleet, nil
				shared[i] = run(in)
			})
		}
		wg.Wait()
		for i, in := range ins {
			if diff := cmp.Diff(run(in), shared[i]); diff != "" {
				t.Fatalf("seed %d, binding %d: with a Fleet (-alone +fleet):\n%s\ninput: %s", seed, i, diff, describe(in))
			}
		}
	}
}

// TestFleetMemoBound checks that a Fleet remembers at most maxFleetMemos
// requirements, kinds and affinities, and that schedules beyond that are
// still right.
func TestFleetMemoBound(t *testing.T) {
	var clusters []*v1alpha1.Cluster
	for i := range 20 {
		c := newCluster(fmt.Sprintf("m%02d", i), summary(resources("pods", "100", "cpu", fmt.Sprint(i+1)), nil))
		c.Status.APIEnablements = fleetAPIs[1+i%2]
		clusters = append(clusters, c)
	}
	fleet, err := NewFleet(clusters)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxFleetMemos + 20 {
		var names []string
		for j, c := range clusters {
			if (i+1)&(1<<(j%10)) != 0 {
				names = append(names, c.Name)
			}
		}
		in := Input{
			Placement: &v1alpha1.Placement{ReplicaScheduling: dynamicWeight(), ClusterAffinity: &v1alpha1.ClusterAffinity{ClusterNames: names}},
			Replicas:  10, Clusters: clusters,
			Requirements: &v1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(100+i), resource.DecimalSI)}},
			APIVersion:   "v1", Kind: fmt.Sprintf("Kind%d", i),
		}
		alone, aloneErr := Schedule(in)
		in.Fleet = fleet
		shared, sharedErr := Schedule(in)
		if diff := cmp.Diff(fmt.Sprint(alone, aloneErr), fmt.Sprint(shared, sharedErr)); diff != "" {
			t.Fatalf("requirements %d: with a Fleet (-alone +fleet):\n%s", i, diff)
		}
	}
	if fleet.rooms.len() != maxFleetMemos || fleet.unserved.len() != maxFleetMemos || fleet.matches.len() != maxFleetMemos {
		t.Errorf("Fleet remembers %d requirements, %d kinds and %d affinities, want %d each", fleet.rooms.len(), fleet.unserved.len(), fleet.matches.len(), maxFleetMemos)
	}
}

func TestNewFleetRejects(t *testing.T) {
	a := newCluster("a")
	for name, clusters := range map[string][]*v1alpha1.Cluster{
		"nil cluster":  {a, nil},
		"listed twice": {a, newCluster("a")},
	} {
		if _, err := NewFleet(clusters); err == nil {
			t.Errorf("%s: NewFleet accepted it", name)
		}
	}
}
