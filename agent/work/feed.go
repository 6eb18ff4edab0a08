package work

import (
	"container/list"
	"sync"

	"github.com/flotilla-io/flotilla/protocol"
)

// Feed carries the engine's messages for the hub to one session: WorkApplied,
// WorkDeleted and WorkStatus, in the order they happened. It never blocks the
// engine: a message that is not read yet is replaced by a newer one of the
// same type for the same Work (which moves to the end, behind what happened
// in between), so a slow reader holds at most three messages per Work.
type Feed struct {
	mu      sync.Mutex
	pending *list.List // of protocol.Message, oldest first
	index   map[feedKey]*list.Element
	ready   chan struct{}
	detach  func()
}

type feedKey struct {
	typ  protocol.MessageType
	work string
}

func newFeed(detach func()) *Feed {
	return &Feed{pending: list.New(), index: map[feedKey]*list.Element{}, ready: make(chan struct{}, 1), detach: detach}
}

// Ready receives a value after messages were added; then Pop them all.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Pop returns the oldest pending message, or false when there is none.
func (f *Feed) Pop() (protocol.Message, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	front := f.pending.Front()
	if front == nil {
		return nil, false
	}
	m := f.pending.Remove(front).(protocol.Message)
	delete(f.index, keyOf(m))
	return m, true
}

// Close detaches the feed from the engine; no message is added after it.
func (f *Feed) Close() { f.detach() }

func (f *Feed) push(m protocol.Message) {
	key := keyOf(m)
	f.mu.Lock()
	if old, ok := f.index[key]; ok {
		f.pending.Remove(old)
	}
	f.index[key] = f.pending.PushBack(m)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default: // already signalled
	}
}

func keyOf(m protocol.Message) feedKey {
	key := feedKey{typ: m.Type()}
	switch m := m.(type) {
	case *protocol.WorkApplied:
		key.work = m.Name
	case *protocol.WorkDeleted:
		key.work = m.Name
	case *protocol.WorkStatus:
		key.work = m.Name
	}
	return key
}

// feeds are the engine's subscribers; normally one session, or none.
type feeds struct {
	mu  sync.Mutex
	set map[*Feed]bool
}

func (fs *feeds) subscribe() *Feed {
	var f *Feed
	f = newFeed(func() {
		fs.mu.Lock()
		delete(fs.set, f)
		fs.mu.Unlock()
	})
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.set == nil {
		fs.set = map[*Feed]bool{}
	}
	fs.set[f] = true
	return f
}

// emit gives m to every subscriber; with none, m is dropped: the next
// session's inventory and status snapshot cover it.
func (fs *feeds) emit(m protocol.Message) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for f := range fs.set {
		f.push(m)
	}
}
