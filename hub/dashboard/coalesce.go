package dashboard

import "sync"

// coalescer keeps the latest value per key until taken: many changes of
// one object between two sends cost one entry, and a removal cancels an
// earlier put (and a put an earlier removal). Safe for concurrent use.
type coalescer[V any] struct {
	mu      sync.Mutex
	puts    map[string]V
	removes map[string]struct{}
	ready   chan struct{} // holds a token while something is pending
}

func newCoalescer[V any]() *coalescer[V] {
	return &coalescer[V]{puts: map[string]V{}, removes: map[string]struct{}{}, ready: make(chan struct{}, 1)}
}

// put records v as key's latest value.
func (c *coalescer[V]) put(key string, v V) {
	c.mu.Lock()
	c.puts[key] = v
	delete(c.removes, key)
	c.mu.Unlock()
	c.signal()
}

// remove records that key went.
func (c *coalescer[V]) remove(key string) {
	c.mu.Lock()
	delete(c.puts, key)
	c.removes[key] = struct{}{}
	c.mu.Unlock()
	c.signal()
}

func (c *coalescer[V]) signal() {
	select {
	case c.ready <- struct{}{}:
	default: // already signalled
	}
}

// Ready receives a value when something may be pending.
func (c *coalescer[V]) Ready() <-chan struct{} { return c.ready }

// take returns and clears what is pending.
func (c *coalescer[V]) take() (puts map[string]V, removes []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	puts = c.puts
	for k := range c.removes {
		removes = append(removes, k)
	}
	c.puts, c.removes = map[string]V{}, map[string]struct{}{}
	return puts, removes
}

// keySet collects the names of changed objects between two flushes.
type keySet struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newKeySet() *keySet { return &keySet{keys: map[string]struct{}{}} }

func (s *keySet) add(key string) {
	s.mu.Lock()
	s.keys[key] = struct{}{}
	s.mu.Unlock()
}

func (s *keySet) take() map[string]struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.keys
	s.keys = map[string]struct{}{}
	return out
}
