package clusterstatus

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// requests builds a resource list from name/quantity pairs.
func requests(pairs ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		list[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return list
}

func container(reqs corev1.ResourceList) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: reqs}}
}

func sidecar(reqs corev1.ResourceList) corev1.Container {
	c := container(reqs)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want map[string]string
	}{
		{
			name: "containers add up",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				container(requests("cpu", "100m", "memory", "64Mi")),
				container(requests("cpu", "200m", "memory", "64Mi")),
			}},
			want: map[string]string{"cpu": "300m", "memory": "128Mi"},
		},
		{
			name: "a larger init container wins per resource",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(requests("cpu", "500m", "memory", "100Mi"))},
				Containers:     []corev1.Container{container(requests("cpu", "100m", "memory", "1Gi"))},
			},
			want: map[string]string{"cpu": "500m", "memory": "1Gi"},
		},
		{
			name: "sidecars run next to later init containers and the main containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					sidecar(requests("cpu", "100m")),
					container(requests("cpu", "300m")),
				},
				Containers: []corev1.Container{container(requests("cpu", "200m"))},
			},
			want: map[string]string{"cpu": "400m"},
		},
		{
			name: "overhead comes on top",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(requests("cpu", "100m"))},
				Overhead:   requests("cpu", "50m", "memory", "20Mi"),
			},
			want: map[string]string{"cpu": "150m", "memory": "20Mi"},
		},
		{
			name: "pod-level requests replace the containers' for what they name",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{container(requests("cpu", "100m", "memory", "10Mi"))},
				Resources:  &corev1.ResourceRequirements{Requests: requests("cpu", "1")},
			},
			want: map[string]string{"cpu": "1", "memory": "10Mi"},
		},
		{
			name: "extended resources count too",
			spec: corev1.PodSpec{Containers: []corev1.Container{container(requests("nvidia.com/gpu", "2"))}},
			want: map[string]string{"nvidia.com/gpu": "2"},
		},
		{
			name: "no requests",
			spec: corev1.PodSpec{Containers: []corev1.Container{{}}},
			want: map[string]string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := quantityStrings(podRequests(&corev1.Pod{Spec: tc.spec}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodRequestsLeavesSpecAlone(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{sidecar(requests("cpu", "1.5")), container(requests("cpu", "2.5"))},
		Containers:     []corev1.Container{container(requests("cpu", "0.5"))},
	}}
	before := pod.DeepCopy()
	podRequests(pod)
	podRequests(pod)
	if !apiequality.Semantic.DeepEqual(before, pod) {
		t.Errorf("podRequests changed the pod: %+v, was %+v", pod.Spec, before.Spec)
	}
}

// listSummary is the computation the agent made before it watched: list
// every node and every pod the field selector nonTerminalPods lets through
// and sum them. It is the reference the watched sums must equal.
func listSummary(nodes []*corev1.Node, pods []*corev1.Pod) map[string]any {
	allocatable := corev1.ResourceList{}
	var total, ready int32
	for _, n := range nodes {
		total++
		if nodeReady(n) {
			ready++
		}
		addResources(allocatable, n.Status.Allocatable)
	}
	allocated := corev1.ResourceList{corev1.ResourceCPU: resource.Quantity{}, corev1.ResourceMemory: resource.Quantity{}}
	var count int64
	for _, p := range pods {
		if p.Spec.NodeName == "" || podTerminal(p) { // the field selector
			continue
		}
		count++
		addResources(allocated, podRequests(p))
	}
	allocated[corev1.ResourcePods] = *resource.NewQuantity(count, resource.DecimalSI)
	return map[string]any{"total": total, "ready": ready,
		"allocatable": quantityStrings(allocatable), "allocated": quantityStrings(allocated)}
}

func snapshotSummary(s capacitySnapshot) map[string]any {
	return map[string]any{"total": s.nodesTotal, "ready": s.nodesReady,
		"allocatable": quantityStrings(s.allocatable), "allocated": quantityStrings(s.allocated)}
}

// capacityEvent is one change a watch delivers.
type capacityEvent struct {
	op  string // add, update, delete
	obj runtime.Object
}

func node(name string, ready bool, pairs ...string) *corev1.Node {
	n := testNode(name, ready, "1", "1", "1")
	n.Status.Allocatable = requests(pairs...)
	return n
}

func pod(name, nodeName string, phase corev1.PodPhase, pairs ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{container(requests(pairs...))}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// TestCapacityMatchesListSummary: the sums kept from a first list and the
// watch's changes equal the list-based sums over the objects that result,
// to the string.
func TestCapacityMatchesListSummary(t *testing.T) {
	withSidecar := pod("mesh", "a", corev1.PodRunning, "cpu", "100m")
	withSidecar.Spec.InitContainers = []corev1.Container{sidecar(requests("cpu", "50m", "memory", "32Mi")), container(requests("cpu", "1"))}
	withSidecar.Spec.Overhead = requests("cpu", "10m")
	for _, tc := range []struct {
		name   string
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		events []capacityEvent
	}{
		{name: "empty cluster"},
		{
			name: "nodes: Ready, not Ready, no conditions, extended resources",
			nodes: []*corev1.Node{node("a", true, "cpu", "8", "memory", "32Gi", "pods", "110"),
				node("b", false, "cpu", "4", "memory", "16Gi", "pods", "110", "nvidia.com/gpu", "2"), {}},
		},
		{
			name:  "node changes: becomes Ready, resized, deleted, added",
			nodes: []*corev1.Node{node("a", false, "cpu", "8", "memory", "32Gi"), node("b", true, "cpu", "4", "nvidia.com/gpu", "2")},
			events: []capacityEvent{
				{"update", node("a", true, "cpu", "8", "memory", "32Gi")},
				{"update", node("a", true, "cpu", "7500m", "memory", "30Gi")},
				{"delete", node("b", true, "cpu", "4", "nvidia.com/gpu", "2")},
				{"add", node("c", true, "cpu", "16", "memory", "64Gi")},
			},
		},
		{
			name: "pods: phases, unbound, sidecars and overhead",
			pods: []*corev1.Pod{
				pod("run", "a", corev1.PodRunning, "cpu", "500m", "memory", "1Gi"),
				pod("pend", "a", corev1.PodPending, "cpu", "250m", "memory", "70Mi"),
				pod("unknown", "b", corev1.PodUnknown, "cpu", "1"),
				pod("done", "a", corev1.PodSucceeded, "cpu", "4"),
				pod("failed", "a", corev1.PodFailed, "cpu", "4"),
				pod("unbound", "", corev1.PodPending, "cpu", "8"),
				withSidecar,
			},
		},
		{
			name: "pod changes: bound, finished, resized, deleted, re-created",
			pods: []*corev1.Pod{
				pod("web", "", corev1.PodPending, "cpu", "500m", "memory", "1Gi"),
				pod("job", "a", corev1.PodRunning, "cpu", "2", "memory", "2Gi"),
				pod("db", "a", corev1.PodRunning, "cpu", "1", "memory", "4Gi"),
			},
			events: []capacityEvent{
				{"update", pod("web", "a", corev1.PodPending, "cpu", "500m", "memory", "1Gi")},
				{"update", pod("web", "a", corev1.PodRunning, "cpu", "500m", "memory", "1Gi")},
				{"update", pod("job", "a", corev1.PodSucceeded, "cpu", "2", "memory", "2Gi")},
				{"update", pod("db", "a", corev1.PodRunning, "cpu", "1500m", "memory", "6Gi")},
				{"delete", pod("web", "a", corev1.PodRunning, "cpu", "500m", "memory", "1Gi")},
				{"add", pod("web", "b", corev1.PodPending, "cpu", "500m", "memory", "1Gi")},
			},
		},
		{
			name: "a resource nobody requests any more leaves the sum",
			pods: []*corev1.Pod{pod("train", "a", corev1.PodRunning, "cpu", "1", "nvidia.com/gpu", "1"), pod("web", "a", corev1.PodRunning, "cpu", "1")},
			events: []capacityEvent{
				{"delete", pod("train", "a", corev1.PodRunning, "cpu", "1", "nvidia.com/gpu", "1")},
			},
		},
		{
			name: "every pod gone",
			pods: []*corev1.Pod{pod("web", "a", corev1.PodRunning, "cpu", "1", "memory", "1Gi")},
			events: []capacityEvent{
				{"delete", pod("web", "a", corev1.PodRunning, "cpu", "1", "memory", "1Gi")},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caps := NewCapacity(fake.NewClientset())
			nodes, pods := objectSet[*corev1.Node]{}, objectSet[*corev1.Pod]{}
			var nodeList, podList []any
			for _, n := range tc.nodes {
				nodes.put(n)
				nodeList = append(nodeList, n)
			}
			for _, p := range tc.pods {
				pods.put(p)
				podList = append(podList, p)
			}
			// The first list, as a plain list gives it.
			if err := caps.nodes.Replace(nodeList, "1"); err != nil {
				t.Fatal(err)
			}
			if err := caps.pods.Replace(podList, "1"); err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.events {
				applyEvent(t, caps, nodes, pods, e)
			}
			checkSets(t, caps.nodes)
			checkSets(t, caps.pods)
			want := listSummary(nodes.list(), pods.list())
			if diff := cmp.Diff(want, snapshotSummary(caps.snapshot())); diff != "" {
				t.Errorf("watched sums differ from listed ones (-list +watch):\n%s", diff)
			}
		})
	}
}

// TestCapacityMatchesListSummaryRandomly drives the sums through random
// changes and compares them with a fresh list-based sum after every one.
// It mixes binary and decimal memory quantities: a sum takes the format of
// its first term, so the list-based sum, made in name order, and the
// watched one, made in event order, may write the same value differently
// ("1548576Ki", "1585741824"); the values are compared.
func TestCapacityMatchesListSummaryRandomly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	caps := NewCapacity(fake.NewClientset())
	nodes, pods := objectSet[*corev1.Node]{}, objectSet[*corev1.Pod]{}
	// A watch-list's first list arrives as entries the store made.
	if err := caps.nodes.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	if err := caps.pods.Replace(nil, "1"); err != nil {
		t.Fatal(err)
	}
	cpus := []string{"100m", "250m", "1", "1500m", "2"}
	mems := []string{"64Mi", "128Mi", "1Gi", "512M", "1G"}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	for step := range 2000 {
		var e capacityEvent
		switch rng.IntN(3) {
		case 0:
			name := fmt.Sprintf("n%d", rng.IntN(8))
			n := node(name, rng.IntN(2) == 0, "cpu", cpus[rng.IntN(len(cpus))], "memory", mems[rng.IntN(len(mems))])
			e = capacityEvent{"update", n}
			if _, ok := nodes[name]; ok && rng.IntN(4) == 0 {
				e.op = "delete"
			}
		default:
			name := fmt.Sprintf("p%d", rng.IntN(40))
			pairs := []string{"cpu", cpus[rng.IntN(len(cpus))], "memory", mems[rng.IntN(len(mems))]}
			if rng.IntN(10) == 0 {
				pairs = append(pairs, "example.com/fpga", "1")
			}
			nodeName := ""
			if rng.IntN(5) > 0 {
				nodeName = "n1"
			}
			e = capacityEvent{"update", pod(name, nodeName, phases[rng.IntN(len(phases))], pairs...)}
			if _, ok := pods["default/"+name]; ok && rng.IntN(4) == 0 {
				e.op = "delete"
			}
		}
		applyEvent(t, caps, nodes, pods, e)
		checkSets(t, caps.nodes)
		checkSets(t, caps.pods)
		if diff := cmp.Diff(byValue(listSummary(nodes.list(), pods.list())), byValue(snapshotSummary(caps.snapshot()))); diff != "" {
			t.Fatalf("step %d (%s %s): watched sums differ from listed ones (-list +watch):\n%s",
				step, e.op, e.obj.(metav1.Object).GetName(), diff)
		}
	}
}

// checkSets checks that a store shares each resource set among exactly the
// entries that have it, and forgets a set nobody has.
func checkSets(t *testing.T, s *summaryStore) {
	t.Helper()
	refs := map[*resourceSet]int{}
	for _, e := range s.entries {
		refs[e.set]++
	}
	for id, set := range s.sets {
		if set.refs != refs[set] || set.refs == 0 || set.id != id {
			t.Fatalf("resource set %q: %d references counted, %d entries have it", id, set.refs, refs[set])
		}
		delete(refs, set)
	}
	if len(refs) > 0 {
		t.Fatalf("%d resource sets in use are not in the store's table", len(refs))
	}
}

// byValue writes every quantity of a summary as its exact decimal value.
func byValue(summary map[string]any) map[string]any {
	out := maps.Clone(summary)
	for _, k := range []string{"allocatable", "allocated"} {
		list := map[string]string{}
		for name, q := range summary[k].(map[string]string) {
			v := resource.MustParse(q)
			list[name] = v.AsDec().String()
		}
		out[k] = list
	}
	return out
}

// applyEvent gives e to the store as the watch would and applies it to
// the object sets. A pod that leaves the field selector arrives deleted.
func applyEvent(t *testing.T, caps *Capacity, nodes objectSet[*corev1.Node], pods objectSet[*corev1.Pod], e capacityEvent) {
	t.Helper()
	var store *summaryStore
	op := e.op
	switch obj := e.obj.(type) {
	case *corev1.Node:
		store = caps.nodes
		if op == "delete" {
			delete(nodes, obj.Name)
		} else {
			nodes.put(obj)
		}
	case *corev1.Pod:
		store = caps.pods
		if op == "delete" {
			delete(pods, obj.Namespace+"/"+obj.Name)
		} else {
			pods.put(obj)
			if obj.Spec.NodeName == "" || podTerminal(obj) {
				op = "delete"
			}
		}
	}
	var err error
	switch op {
	case "add":
		err = store.Add(e.obj)
	case "update":
		err = store.Update(e.obj)
	case "delete":
		err = store.Delete(e.obj)
	}
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
}

// objectSet holds the objects a list would return, by key.
type objectSet[T metav1.Object] map[string]T

func (s objectSet[T]) put(obj T) {
	key := obj.GetName()
	if obj.GetNamespace() != "" {
		key = obj.GetNamespace() + "/" + key
	}
	s[key] = obj
}

// list returns the objects in key order, as the API server lists them.
func (s objectSet[T]) list() []T {
	var out []T
	for _, k := range slices.Sorted(maps.Keys(s)) {
		out = append(out, s[k])
	}
	return out
}

func TestCapacityStoreRefusesOtherTypes(t *testing.T) {
	caps := NewCapacity(fake.NewClientset())
	if err := caps.pods.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}); err == nil {
		t.Error("the pod store took a node")
	}
	if err := caps.nodes.Replace([]any{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, "1"); err == nil {
		t.Error("the node store took a pod")
	}
}
