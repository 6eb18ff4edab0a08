package controller

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// ReportingController names the hub in the events it records.
const ReportingController = "flotilla.io/hub"

// maxEventNote is the events.k8s.io/v1 limit on an event's note.
const maxEventNote = 1024

// apiRecorder records events through the API server with client-go's
// events.k8s.io/v1 broadcaster, which correlates them: an event that
// repeats (same object, type, reason and message) is one stored event whose
// series count and last-observed time go up, never one object per
// occurrence. Event times keep microseconds.
type apiRecorder struct {
	ctx      context.Context
	client   kubernetes.Interface
	recorder events.EventRecorder
	sink     *boundedSink
	dropped  atomic.Int64
	// namespaces holds the namespaces known to exist: an event lives in
	// the namespace of the object it is about, which must exist.
	namespaces sync.Map
}

// DroppingRecorder is a Recorder that drops events it cannot write soon
// enough, and counts them.
type DroppingRecorder interface {
	Recorder
	// Dropped is how many events were dropped because too many writes
	// were waiting.
	Dropped() int64
}

// StartEventRecorder records events through client until ctx ends, a few
// writes at a time (events_sink.go).
func StartEventRecorder(ctx context.Context, client kubernetes.Interface) DroppingRecorder {
	sink := newBoundedSink(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster := events.NewBroadcaster(sink)
	broadcaster.StartRecordingToSink(ctx.Done())
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return &apiRecorder{ctx: ctx, client: client, recorder: broadcaster.NewRecorder(scheme.Scheme, ReportingController), sink: sink}
}

// Dropped implements DroppingRecorder.
func (r *apiRecorder) Dropped() int64 { return r.dropped.Load() }

// Event implements Recorder. The broadcaster correlates by object, type,
// reason and action, not by message: the action carries a hash of the
// message so that different messages (another taint, another placement)
// stay separate events and only true repeats are counted.
func (r *apiRecorder) Event(ref corev1.ObjectReference, eventType, reason, message string) {
	if r.sink.full() {
		r.dropped.Add(1)
		return
	}
	note := truncate(message, maxEventNote)
	record := func() { r.recorder.Eventf(&ref, nil, eventType, reason, action(reason, note), "%s", note) }
	if ref.Namespace == "" {
		record()
		return
	}
	if _, ok := r.namespaces.Load(ref.Namespace); ok {
		record()
		return
	}
	go func() { // once per namespace; the caller must not wait for it
		r.ensureNamespace(ref.Namespace)
		record()
	}()
}

// ensureNamespace makes sure ns exists before an event is written there.
func (r *apiRecorder) ensureNamespace(ns string) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	if EnsureNamespace(ctx, r.client, ns) == nil {
		r.namespaces.Store(ns, true)
	}
}

// EnsureNamespace creates namespace ns if it is missing.
func EnsureNamespace(ctx context.Context, client kubernetes.Interface, ns string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

func action(reason, note string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(note))
	return fmt.Sprintf("%s-%08x", reason, h.Sum32())
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
