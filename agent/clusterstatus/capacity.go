package clusterstatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// nonTerminalPods selects pods that hold their requests on a node: bound to
// one and not finished. Pending pods without a node reserve nothing yet.
// The API server turns a pod that stops matching (it finished) into a
// deletion on the watch, and one that starts matching (it was bound) into
// an addition.
const nonTerminalPods = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// Capacity keeps the member cluster's node count and the sums of node
// allocatable resources and pod requests up to date from two watches
// (client-go reflectors), so that a status report reads them without
// asking the API server. Per node and pod it keeps only its key, whether
// it is Ready and a pointer to its resources, shared with every other
// object that has the same: never the objects.
type Capacity struct {
	nodes, pods *summaryStore
	reflectors  []*cache.Reflector
}

// capacitySnapshot is what a status report carries about capacity. The
// resource lists are the report's own.
type capacitySnapshot struct {
	nodesSynced, podsSynced bool
	nodesTotal, nodesReady  int32
	allocatable, allocated  corev1.ResourceList
}

// NewWatchClient is a client for the node and pod watches on the member
// cluster rc reaches: a typed client speaking protobuf, which costs both
// sides a fraction of JSON's decoding and shares the API server's encoding
// with the cluster's own controllers.
func NewWatchClient(rc *rest.Config) (kubernetes.Interface, error) {
	protoConfig := rest.CopyConfig(rc)
	protoConfig.ContentType = runtime.ContentTypeProtobuf
	protoConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	// The API server would gzip every watch event for this watcher alone,
	// and the agent gunzip it, to save bytes on what is mostly a local
	// link.
	protoConfig.DisableCompression = true
	return kubernetes.NewForConfig(protoConfig)
}

// NewCapacity watches nodes and pods through client (see [NewWatchClient]);
// nothing is watched until Run.
func NewCapacity(client kubernetes.Interface) *Capacity {
	c := &Capacity{nodes: newSummaryStore(nodeEntryOf), pods: newSummaryStore(podEntryOf)}
	nodes := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Nodes().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Nodes().Watch(ctx, opts)
		},
	}, client)
	pods := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = nonTerminalPods
			return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = nonTerminalPods
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
		},
	}, client)
	c.reflectors = []*cache.Reflector{
		cache.NewReflectorWithOptions(nodes, &corev1.Node{}, c.nodes, cache.ReflectorOptions{Name: "flotilla-agent/nodes"}),
		cache.NewReflectorWithOptions(pods, &corev1.Pod{}, c.pods, cache.ReflectorOptions{Name: "flotilla-agent/pods"}),
	}
	return c
}

// Run keeps the sums up to date until ctx ends. The reflectors retry with
// backoff when the API server is unreachable, and list again when a watch
// cannot resume; meanwhile the sums keep their last values.
func (c *Capacity) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range c.reflectors {
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	wg.Wait()
}

// waitSynced waits until both sums are complete, at most timeout; false if
// they are not.
func (c *Capacity) waitSynced(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range []*summaryStore{c.nodes, c.pods} {
		select {
		case <-s.synced:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Nodes returns how many nodes the node watch counts, and whether it has
// listed them yet.
func (c *Capacity) Nodes() (total int32, synced bool) {
	s := c.snapshot()
	return s.nodesTotal, s.nodesSynced
}

// snapshot returns the current sums. allocated always names cpu, memory
// and pods (zero if nothing requests them).
func (c *Capacity) snapshot() capacitySnapshot {
	var s capacitySnapshot
	var nodes, pods int64
	nodes, s.nodesReady, s.allocatable, s.nodesSynced = c.nodes.totals()
	pods, _, s.allocated, s.podsSynced = c.pods.totals()
	s.nodesTotal = int32(nodes)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := s.allocated[name]; !ok {
			s.allocated[name] = resource.Quantity{}
		}
	}
	s.allocated[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	return s
}

// summaryEntry is what a store keeps of one object: its key, whether it
// counts (a pod that finished or is not bound does not), whether it is
// Ready (nodes), and the resources it adds to the sum.
type summaryEntry struct {
	key       string
	counts    bool
	ready     bool
	resources []namedQuantity
}

type namedQuantity struct {
	name corev1.ResourceName
	q    resource.Quantity
}

// nodeEntryOf keeps of a node its readiness and allocatable resources.
func nodeEntryOf(key string, obj any) (*summaryEntry, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("node watch delivered a %T", obj)
	}
	return &summaryEntry{key: key, counts: true, ready: nodeReady(node), resources: compact(node.Status.Allocatable)}, nil
}

// podEntryOf keeps of a pod what the scheduler reserves for it, if it
// holds it on a node.
func podEntryOf(key string, obj any) (*summaryEntry, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod watch delivered a %T", obj)
	}
	if pod.Spec.NodeName == "" || podTerminal(pod) {
		return &summaryEntry{key: key}, nil
	}
	return &summaryEntry{key: key, counts: true, resources: compact(podRequests(pod))}, nil
}

// compact copies a resource list into a slice sorted by name, a fraction
// of a map's size.
func compact(list corev1.ResourceList) []namedQuantity {
	if len(list) == 0 {
		return nil
	}
	out := make([]namedQuantity, 0, len(list))
	for name, q := range list {
		out = append(out, namedQuantity{name, q.DeepCopy()})
	}
	slices.SortFunc(out, func(a, b namedQuantity) int { return strings.Compare(string(a.name), string(b.name)) })
	return out
}

// resourceSet is one list of resources, shared by every entry that has
// it: most pods of a cluster come from a few templates and most nodes
// from a few machine types, so a store keeps a few sets, not one per
// object.
type resourceSet struct {
	id    string
	items []namedQuantity
	refs  int
}

// setID identifies a resource list by its names, values and formats (the
// format of a sum's first term is the sum's).
func setID(items []namedQuantity) string {
	var b strings.Builder
	for _, r := range items {
		b.WriteString(string(r.name))
		b.WriteByte('=')
		b.WriteString(r.q.String())
		b.WriteByte('/')
		b.WriteString(string(r.q.Format))
		b.WriteByte(';')
	}
	return b.String()
}

// stored is what a store keeps per counted object, next to its key.
type stored struct {
	ready bool
	set   *resourceSet
}

// summaryStore is the store a reflector fills: instead of the objects it
// keeps one small entry per counted object and the running sums. It
// implements cache.TransformingStore, so that even the reflector's
// temporary store of an initial watch-list holds entries, not objects.
type summaryStore struct {
	entryOf func(key string, obj any) (*summaryEntry, error)

	mu      sync.Mutex
	entries map[string]stored
	sets    map[string]*resourceSet // by id
	count   int64
	ready   int32
	sum     corev1.ResourceList
	// contributors counts the entries naming each resource, so that a
	// resource nobody names any more leaves the sum, as it would from a
	// sum made afresh.
	contributors map[corev1.ResourceName]int
	// synced is closed by the first Replace: the sums are complete.
	synced     chan struct{}
	syncedOnce sync.Once
	// onChange, if set, is called after every change (tests).
	onChange func()
}

func newSummaryStore(entryOf func(string, any) (*summaryEntry, error)) *summaryStore {
	s := &summaryStore{entryOf: entryOf, synced: make(chan struct{})}
	s.reset()
	return s
}

func (s *summaryStore) reset() {
	s.entries = map[string]stored{}
	s.sets = map[string]*resourceSet{}
	s.count, s.ready = 0, 0
	s.sum = corev1.ResourceList{}
	s.contributors = map[corev1.ResourceName]int{}
}

// entry turns an object (or an entry made earlier) into an entry.
func (s *summaryStore) entry(obj any) (*summaryEntry, error) {
	if e, ok := obj.(*summaryEntry); ok {
		return e, nil
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, fmt.Errorf("key of a watched object: %w", err)
	}
	return s.entryOf(key, obj)
}

// Transformer is cache.TransformingStore's: what the reflector's temporary
// store keeps of each object.
func (s *summaryStore) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) { return s.entry(obj) }
}

func (s *summaryStore) Add(obj any) error    { return s.put(obj) }
func (s *summaryStore) Update(obj any) error { return s.put(obj) }

func (s *summaryStore) put(obj any) error {
	e, err := s.entry(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if old, ok := s.entries[e.key]; ok && e.counts && old.ready == e.ready && sameItems(old.set.items, e.resources) {
		// Most updates are heartbeats and status changes that leave the
		// sums alone.
		s.mu.Unlock()
		return nil
	}
	s.remove(e.key)
	s.insert(e)
	s.mu.Unlock()
	s.changed()
	return nil
}

// sameItems reports whether two sorted resource lists have the same names,
// values and formats.
func sameItems(a, b []namedQuantity) bool {
	return slices.EqualFunc(a, b, func(x, y namedQuantity) bool {
		return x.name == y.name && x.q.Format == y.q.Format && x.q.Cmp(y.q) == 0
	})
}

func (s *summaryStore) Delete(obj any) error {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	e, err := s.entry(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.remove(e.key)
	s.mu.Unlock()
	s.changed()
	return nil
}

// Replace starts the sums over from a complete list.
func (s *summaryStore) Replace(list []any, _ string) error {
	entries := make([]*summaryEntry, 0, len(list))
	for _, obj := range list {
		e, err := s.entry(obj)
		if err != nil {
			return err
		}
		entries = append(entries, e)
	}
	s.mu.Lock()
	s.reset()
	for _, e := range entries {
		s.insert(e)
	}
	s.mu.Unlock()
	s.syncedOnce.Do(func() { close(s.synced) })
	s.changed()
	return nil
}

// Resync has nothing to do: the store has no handlers to replay to.
func (s *summaryStore) Resync() error { return nil }

func (s *summaryStore) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// insert adds a counted entry to the sums; s.mu is held.
func (s *summaryStore) insert(e *summaryEntry) {
	if !e.counts {
		return
	}
	id := setID(e.resources)
	set, ok := s.sets[id]
	if !ok {
		set = &resourceSet{id: id, items: e.resources}
		s.sets[id] = set
	}
	set.refs++
	s.entries[strings.Clone(e.key)] = stored{ready: e.ready, set: set}
	s.count++
	if e.ready {
		s.ready++
	}
	for _, r := range set.items {
		total := s.sum[r.name]
		total.Add(r.q)
		s.sum[r.name] = total
		s.contributors[r.name]++
	}
}

// remove takes the entry of key, if any, out of the sums; s.mu is held.
func (s *summaryStore) remove(key string) {
	e, ok := s.entries[key]
	if !ok {
		return
	}
	delete(s.entries, key)
	if e.set.refs--; e.set.refs == 0 {
		delete(s.sets, e.set.id)
	}
	s.count--
	if e.ready {
		s.ready--
	}
	for _, r := range e.set.items {
		if s.contributors[r.name]--; s.contributors[r.name] == 0 {
			delete(s.contributors, r.name)
			delete(s.sum, r.name)
			continue
		}
		total := s.sum[r.name]
		total.Sub(r.q)
		s.sum[r.name] = total
	}
}

// totals returns the count of counted entries, how many are Ready, a copy
// of the sums, and whether a first complete list arrived.
func (s *summaryStore) totals() (count int64, ready int32, sum corev1.ResourceList, synced bool) {
	select {
	case <-s.synced:
		synced = true
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.ready, s.sum.DeepCopy(), synced
}
