package work

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"

	"github.com/flotilla-io/flotilla/protocol"
)

// statusEngine is an engine of cfg (its clients fakes) holding Work "w"
// of one ConfigMap, applied and never reported, with its status queue and
// watcher (synced) running until the test ends, and a subscription to what
// it sends.
func statusEngine(t *testing.T, cfg Config) (*Engine, *Feed) {
	t.Helper()
	conf := cmRefOf("n", "c")
	obj := &unstructured.Unstructured{Object: configMap("c", "n", nil)}
	obj.SetLabels(map[string]string{LabelManagedBy: ManagedBy, LabelWork: "w"})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{conf.gvr(): "ConfigMapList"}, obj)
	cfg.Kube, cfg.Dynamic = fake.NewClientset(), dyn
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	e.ctx, e.statusQ = ctx, workqueue.NewTypedDelayingQueue[string]()
	synced := make(chan struct{})
	e.watch = newWatcher(ctx, dyn, false, func(string) {}, func(schema.GroupVersionResource) { close(synced) })
	t.Cleanup(func() {
		cancel()
		e.statusQ.ShutDown()
		e.watch.wait()
	})
	// The first report must see the ConfigMap, not "waiting for the
	// watch": a later one that does would differ in health.
	e.watch.ensure(conf)
	<-synced
	feed := e.Subscribe()
	e.state("w").current = &manifestSet{generation: 1, entries: []manifestEntry{{result: conf.result(0)}}}
	return e, feed
}

// TestStatusIsCoalesced: a second change within StatusInterval of a
// WorkStatus is not sent at once but looked at again once the interval has
// passed, and then sent if anything differs.
func TestStatusIsCoalesced(t *testing.T) {
	const interval = 100 * time.Millisecond
	e, feed := statusEngine(t, Config{StatusInterval: interval})

	e.refreshStatus("w")
	first, ok := feed.Pop()
	if !ok {
		t.Fatal("no WorkStatus for a Work never reported")
	}
	sentAt := e.works["w"].reportedAt
	e.works["w"].reported = nil // as if the objects changed at once
	e.refreshStatus("w")
	if m, ok := feed.Pop(); ok {
		t.Fatalf("a second WorkStatus within the interval: %+v after %+v", m, first)
	}
	work, _ := e.statusQ.Get() // the delaying queue holds it until the interval ends
	if waited := time.Since(sentAt); work != "w" || waited < interval {
		t.Fatalf("queued %q again after %v, want w after at least %v", work, waited, interval)
	}
	e.statusQ.Done(work)
	e.refreshStatus(work)
	m, ok := feed.Pop()
	if !ok {
		t.Fatal("no WorkStatus once the interval passed")
	}
	if s := m.(*protocol.WorkStatus); s.Name != "w" || s.Generation != 1 || len(s.Manifests) != 1 {
		t.Errorf("WorkStatus = %+v", s)
	}
}

// TestProgressWaitsLonger: a change of key status alone (replica counts,
// the health as reported) waits for ProgressInterval; a change of health
// goes after StatusInterval.
func TestProgressWaitsLonger(t *testing.T) {
	const interval = 100 * time.Millisecond
	e, feed := statusEngine(t, Config{StatusInterval: interval, ProgressInterval: time.Hour})
	e.refreshStatus("w")
	first, ok := feed.Pop()
	if !ok {
		t.Fatal("no WorkStatus for a Work never reported")
	}
	observed := first.(*protocol.WorkStatus).Manifests

	tests := []struct {
		name   string
		change func(*protocol.ManifestResult)
		sent   bool
	}{
		{"key status alone", func(r *protocol.ManifestResult) { r.Status = []byte(`{"readyReplicas":1}`) }, false},
		{"health message alone", func(r *protocol.ManifestResult) { r.Message = "Available: 0/1" }, false},
		{"health", func(r *protocol.ManifestResult) { r.Health = protocol.HealthUnknown + "x" }, true},
		{"state values", func(r *protocol.ManifestResult) { r.StateValues = map[string]string{"p": "v"} }, true},
	}
	for _, tt := range tests {
		reported := slices.Clone(observed)
		tt.change(&reported[0])
		e.works["w"].reported = reported // as if the objects changed since
		e.works["w"].reportedAt = time.Now().Add(-interval)
		e.refreshStatus("w")
		if _, sent := feed.Pop(); sent != tt.sent {
			t.Errorf("%s changed: WorkStatus sent %v, want %v", tt.name, sent, tt.sent)
		}
	}
}
