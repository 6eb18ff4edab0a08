package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

// Stream is the agent's work stream (a *quic.Stream).
type Stream interface {
	io.Reader
	io.Writer
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

const (
	// inventoryTimeout bounds the wait for the agent's first message.
	inventoryTimeout = 10 * time.Second
	// writeTimeout bounds one Work write: Works may be large, but an agent
	// that stops reading must not hold the session forever.
	writeTimeout = 30 * time.Second
	// deleteSent marks a Work whose delete was sent, in session.sent.
	deleteSent = -1
	// heldFenced, in session.sent, marks a Work the agent holds but has
	// fenced: it matches no generation, so the Work is sent again (which
	// restores it) if the hub still wants it, and deleted if not.
	heldFenced = 0
)

// session is one agent's work stream. Its loop goroutine owns sent and
// is the only writer on the stream.
type session struct {
	d         *Dispatcher
	cluster   string
	seq       uint64 // orders the cluster's sessions: higher is newer
	namespace string // the cluster's execution namespace
	stream    Stream
	logger    *slog.Logger

	mu      sync.Mutex
	pending map[string]time.Time // Work names changed since the loop last looked, and since when
	wake    chan struct{}

	// sent is the generation each Work has at the agent, as far as the hub
	// knows: from the inventory, then from what it sent.
	sent map[string]int64
	// fenced are the Works the inventory reported fenced, until resync.
	fenced map[string]bool
	// written is shared with the status writers (statusWrites), which
	// store what the agent reports.
	written *writtenWorks
	// answered is the generation of each Work whose WorkApplied answer
	// was handed over: answers to what the hub sent go to the status
	// writers at once, anything else the agent reports is queued and
	// paced.
	answered map[string]int64
	// queued holds the newest report per Work not yet written; limit
	// (the cluster's) paces their writes and retry fires when it allows
	// the next.
	queued map[string]protocol.Message
	limit  statusLimiter
	retry  *time.Timer
}

func (s *session) notify(name string) {
	s.mu.Lock()
	if _, ok := s.pending[name]; !ok {
		s.pending[name] = s.d.clock.Now()
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Serve runs the work stream of one session until it fails or ctx ends.
// seq orders the sessions of a cluster (higher is newer): the work stream
// of a session replaced by a newer one is not served, even when it gets
// here last.
func (d *Dispatcher) Serve(ctx context.Context, cluster string, seq uint64, stream Stream) error {
	s := &session{d: d, cluster: cluster, seq: seq, namespace: v1alpha1.ExecutionNamespace(cluster), stream: stream, logger: d.logger.With("cluster", cluster),
		pending: map[string]time.Time{}, wake: make(chan struct{}, 1), sent: map[string]int64{}, fenced: map[string]bool{}, written: &writtenWorks{works: map[string]*v1alpha1.Work{}},
		answered: map[string]int64{}, queued: map[string]protocol.Message{}, limit: d.paceOf(cluster)}
	reader := protocol.NewAgentReader(stream) // large frames go only to the agent
	defer func() {
		if s.retry != nil {
			s.retry.Stop()
		}
	}()
	_ = stream.SetReadDeadline(time.Now().Add(inventoryTimeout))
	first, err := reader.ReadMessage()
	if err != nil {
		return fmt.Errorf("read work inventory: %w", err)
	}
	inventory, ok := first.(*protocol.WorkInventory)
	if !ok {
		return fmt.Errorf("%w: work stream starts with %v, want WorkInventory", protocol.ErrInvalidMessage, first.Type())
	}
	_ = stream.SetReadDeadline(time.Time{})
	for _, ref := range inventory.Works {
		s.sent[ref.Name] = ref.Generation
		if ref.Fenced {
			s.sent[ref.Name], s.fenced[ref.Name] = heldFenced, true
		}
	}
	// Before the informer holds every Work, a held Work would look unknown
	// and be deleted from the member cluster.
	select {
	case <-d.works.Synced():
	case <-ctx.Done():
		return nil
	}
	// Attach before the resync, so no change between them is missed.
	if newer := d.attach(s); newer != 0 {
		s.logger.Info("work stream of a replaced session not served", "session", seq, "newerSession", newer)
		return nil
	}
	defer d.detach(s)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	incoming := make(chan protocol.Message)
	readErr := make(chan error, 1)
	go func() { readErr <- s.readLoop(ctx, reader, incoming) }()
	if err := s.resync(); err != nil {
		return err
	}
	for {
		var retry <-chan time.Time
		if s.retry != nil {
			retry = s.retry.C
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			return err
		case m := <-incoming:
			s.receive(m)
		case <-retry:
			s.retry = nil
			s.writeQueued()
		case <-s.wake:
			if err := s.sendPending(ctx); err != nil {
				return err
			}
		}
	}
}

// receive hands an answer to what the hub sent to the status writers at
// once, and queues any other report.
func (s *session) receive(m protocol.Message) {
	switch m := m.(type) {
	case *protocol.WorkApplied:
		if s.sent[m.Name] == m.Generation && s.answered[m.Name] != m.Generation {
			s.answered[m.Name] = m.Generation
			s.store(m, false)
			return
		}
		s.queue(m.Name, m)
	case *protocol.WorkStatus:
		s.queue(m.Name, m)
	case *protocol.WorkDeleted:
		switch have, held := s.sent[m.Name]; {
		case held && have == deleteSent:
			// The answer to a delete the hub sent.
			s.forget(m.Name)
			s.later(m.Name, func(ctx context.Context) { s.recordDeleted(ctx, m.Name) }, false)
		case held:
			// The agent dropped a Work the hub wants it to hold: sent
			// again, at the pace of its reports, for a looping agent.
			s.d.limits.unrequestedDeletes.Add(1)
			s.queue(m.Name, m)
		default:
			s.d.limits.unrequestedDeletes.Add(1) // nothing there, or already recorded
		}
	default:
		s.logger.Warn("unexpected message on the work stream; ignored", "type", m.Type())
	}
}

// queue keeps m as the newest report about a Work of this cluster (others
// are ignored) and writes what the pace allows.
func (s *session) queue(name string, m protocol.Message) {
	if s.d.works.Get(s.namespace+"/"+name) == nil {
		return // no such Work: nothing to store it on
	}
	if _, ok := s.queued[name]; ok {
		s.d.limits.coalesced.Add(1)
	}
	s.queued[name] = m
	s.writeQueued()
}

// writeQueued writes queued reports while the session's pace allows, and
// arms retry for the rest.
func (s *session) writeQueued() {
	if len(s.queued) > 0 && s.d.storeFull() {
		s.d.limits.dropped.Add(int64(len(s.queued)))
		clear(s.queued) // the store is too full for what agents report
		return
	}
	for name, m := range s.queued {
		ok, delay := s.limit.allow(time.Now(), s.queuedSize(name, m))
		if !ok {
			if s.retry == nil {
				s.retry = time.NewTimer(delay)
			}
			return
		}
		delete(s.queued, name)
		s.store(m, true)
	}
}

// store hands the agent's answer to what the hub sent, or a paced report,
// to the status writers; a Work the agent says it dropped is sent again
// from the loop, which owns what was sent.
func (s *session) store(m protocol.Message, paced bool) {
	switch m := m.(type) {
	case *protocol.WorkApplied:
		s.later(m.Name, func(ctx context.Context) { s.recordApplied(ctx, m, false) }, paced)
	case *protocol.WorkStatus:
		s.later(m.Name, func(ctx context.Context) { s.recordStatus(ctx, m) }, paced)
	case *protocol.WorkDeleted:
		s.resendDropped(m.Name)
	}
}

// later has the status writers run write for the Work name, after the
// writes for it already handed over; a paced report replaces the one
// still waiting (statusWrites.add).
func (s *session) later(name string, write func(context.Context), paced bool) {
	s.d.writes.add(s.namespace+"/"+name, write, paced)
}

// queuedSize is what writing a queued report costs in bytes: the status
// it stores, or for a Work the agent says it dropped, the Work sent again.
func (s *session) queuedSize(name string, m protocol.Message) int {
	switch m := m.(type) {
	case *protocol.WorkApplied:
		return reportSize(m.Manifests)
	case *protocol.WorkStatus:
		return reportSize(m.Manifests)
	case *protocol.WorkDeleted:
		return workSize(s.d.works.Get(s.namespace + "/" + name))
	}
	return 0
}

// readLoop passes the agent's messages to the session loop.
func (s *session) readLoop(ctx context.Context, reader *protocol.Reader, out chan<- protocol.Message) error {
	for {
		m, err := reader.ReadMessage()
		if err != nil {
			return fmt.Errorf("read work stream: %w", err)
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return nil
		}
	}
}

// resync brings the agent in step with the API after its inventory:
// Works it lacks or holds at another generation or fenced, tombstones, and
// Works it holds that the hub no longer knows.
func (s *session) resync() error {
	works := s.d.worksOf(s.cluster)
	acked, restored := 0, 0
	for name, w := range works {
		if s.fenced[name] && w.DeletionTimestamp == nil {
			// Noted before the upsert goes out, so the agent's answer
			// finds it and marks the Work restored.
			s.logger.Warn("the agent stopped this Work's workloads while it was cut off from the hub; sending the Work again to restore them",
				"work", name, "generation", w.Generation)
			s.later(name, func(ctx context.Context) { s.recordFenced(ctx, name) }, false)
			restored++
		}
		if w.DeletionTimestamp == nil && s.sent[name] == w.Generation {
			acked++
			if w.Status.ObservedGeneration != w.Generation {
				applied := &protocol.WorkApplied{Name: name, Generation: w.Generation, Applied: true}
				s.later(name, func(ctx context.Context) { s.recordApplied(ctx, applied, true) }, false)
			}
			continue
		}
		if err := s.sync(name, w); err != nil {
			return err
		}
	}
	for name := range s.sent {
		if _, known := works[name]; !known {
			if err := s.sync(name, nil); err != nil {
				return err
			}
		}
	}
	clear(s.fenced)
	s.logger.Info("work stream in step", "works", len(works), "alreadyApplied", acked, "sent", len(works)-acked, "restoredFromFencing", restored)
	return nil
}

// sendPending sends what changed for the Works named since the last wake.
func (s *session) sendPending(ctx context.Context) error {
	s.mu.Lock()
	names := s.pending
	s.pending = map[string]time.Time{}
	s.mu.Unlock()
	for name, since := range names {
		if ctx.Err() != nil {
			return nil
		}
		w := s.d.works.Get(s.namespace + "/" + name)
		before, held := s.sent[name]
		if err := s.sync(name, w); err != nil {
			return err
		}
		if observe := s.d.observeLatency.Load(); observe != nil {
			if after, ok := s.sent[name]; ok && (!held || after != before) {
				op := "upsert"
				if after == deleteSent {
					op = "delete"
				}
				(*observe)(op, s.d.clock.Since(since))
			}
		}
	}
	return nil
}

// sync sends one Work, or its deletion, if the agent does not have it so.
func (s *session) sync(name string, w *v1alpha1.Work) error {
	have, held := s.sent[name]
	switch {
	case w == nil && !held:
		return nil // gone everywhere
	case w == nil || w.DeletionTimestamp != nil:
		if have == deleteSent {
			return nil
		}
		s.sent[name] = deleteSent
		s.d.deletes.Add(1)
		return s.write(&protocol.WorkDelete{Name: name})
	case have == w.Generation:
		return nil
	}
	manifests := make([]json.RawMessage, len(w.Spec.Workload.Manifests))
	for i, m := range w.Spec.Workload.Manifests {
		manifests[i] = json.RawMessage(m.Raw)
	}
	upsert := &protocol.WorkUpsert{Name: name, Generation: w.Generation, Binding: w.Annotations[v1alpha1.AnnotationWorkBinding], Manifests: manifests,
		StatePaths: w.Spec.StatePaths}
	if w.Spec.Fencing != nil {
		upsert.StopAfterSeconds = w.Spec.Fencing.StopAfterSeconds
	}
	s.sent[name] = w.Generation
	if err := upsert.Validate(); err != nil {
		// The agent would drop the session over it: keep the session, and
		// say on the Work why it is not applied.
		s.logger.Error("Work cannot be sent", "work", name, "err", err)
		refused := &protocol.WorkApplied{Name: name, Generation: w.Generation, Message: "not sent: " + err.Error()}
		s.later(name, func(ctx context.Context) { s.recordApplied(ctx, refused, false) }, false)
		return nil
	}
	s.d.upserts.Add(1)
	return s.write(upsert)
}

func (s *session) write(m protocol.Message) error {
	_ = s.stream.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := protocol.WriteMessage(s.stream, m); err != nil {
		return fmt.Errorf("send %v: %w", m.Type(), err)
	}
	return nil
}
