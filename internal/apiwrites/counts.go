package apiwrites

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Counts are writes counted by kind.
type Counts map[Write]float64

// Minus is c − before, kind by kind (kinds at zero left out).
func (c Counts) Minus(before Counts) Counts {
	out := Counts{}
	for w, n := range c {
		if d := n - before[w]; d != 0 {
			out[w] = d
		}
	}
	return out
}

// Total is the sum over every kind.
func (c Counts) Total() float64 {
	var sum float64
	for _, n := range c {
		sum += n
	}
	return sum
}

// Tally counts the writes a transport carried: those that succeeded and
// those that met a conflict. Its Observe is an Observer; it is safe for
// concurrent use.
type Tally struct {
	mu                   sync.Mutex
	succeeded, conflicts Counts
}

// Observe counts one write by its result; failed writes are not counted.
func (t *Tally) Observe(w Write, code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.succeeded == nil {
		t.succeeded, t.conflicts = Counts{}, Counts{}
	}
	switch ResultOf(code) {
	case Succeeded:
		t.succeeded[w]++
	case Conflicted:
		t.conflicts[w]++
	}
}

// Counts returns copies of the counts so far.
func (t *Tally) Counts() (succeeded, conflicts Counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.succeeded), maps.Clone(t.conflicts)
}

// Table is a Markdown table of writes divided by n, the units they are
// counted per (bindings, evictions): a row per kind that succeeded or met
// a conflict, by resource, subresource and verb, and the total.
func Table(succeeded, conflicts Counts, n float64, per string) string {
	kinds := slices.Collect(maps.Keys(succeeded))
	for w := range conflicts {
		if _, ok := succeeded[w]; !ok {
			kinds = append(kinds, w)
		}
	}
	slices.SortFunc(kinds, Compare)
	var b strings.Builder
	fmt.Fprintf(&b, "| resource | subresource | verb | writes | per %s | conflicts |\n|---|---|---|---:|---:|---:|\n", per)
	ratio := func(v float64) string {
		if n <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", v/n)
	}
	for _, w := range kinds {
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %.0f |\n", w.Resource, w.Subresource, w.Verb, succeeded[w], ratio(succeeded[w]), conflicts[w])
	}
	fmt.Fprintf(&b, "| **total** | | | %.0f | **%s** | %.0f |\n", succeeded.Total(), ratio(succeeded.Total()), conflicts.Total())
	return b.String()
}
