package lease

import (
	"container/heap"
	"time"
)

// Deadlines is a set of named deadlines ordered by time: a min-heap with an
// index, so moving one deadline (a renewal) costs O(log n) and the earliest
// is always at hand for a single timer. It is not safe for concurrent use.
type Deadlines struct {
	items deadlineHeap
	index map[string]*deadline
}

type deadline struct {
	name string
	at   time.Time
	pos  int
}

// NewDeadlines returns an empty set.
func NewDeadlines() *Deadlines {
	return &Deadlines{index: map[string]*deadline{}}
}

// Set adds or moves the deadline of name.
func (d *Deadlines) Set(name string, at time.Time) {
	if item, ok := d.index[name]; ok {
		item.at = at
		heap.Fix(&d.items, item.pos)
		return
	}
	item := &deadline{name: name, at: at}
	d.index[name] = item
	heap.Push(&d.items, item)
}

// Remove drops the deadline of name, if any.
func (d *Deadlines) Remove(name string) {
	if item, ok := d.index[name]; ok {
		heap.Remove(&d.items, item.pos)
		delete(d.index, name)
	}
}

// Next returns the earliest deadline, and false if there is none.
func (d *Deadlines) Next() (time.Time, bool) {
	if len(d.items) == 0 {
		return time.Time{}, false
	}
	return d.items[0].at, true
}

// PopDue removes and returns, earliest first, the names whose deadline is at
// or before now.
func (d *Deadlines) PopDue(now time.Time) []string {
	var due []string
	for len(d.items) > 0 && !d.items[0].at.After(now) {
		item := heap.Pop(&d.items).(*deadline)
		delete(d.index, item.name)
		due = append(due, item.name)
	}
	return due
}

// Len is the number of deadlines.
func (d *Deadlines) Len() int { return len(d.items) }

type deadlineHeap []*deadline

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].name < h[j].name
	}
	return h[i].at.Before(h[j].at)
}
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *deadlineHeap) Push(x any) {
	item := x.(*deadline)
	item.pos = len(*h)
	*h = append(*h, item)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	item := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return item
}
