package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStatusWritesOrderAndReplace: a Work's writes run in the order
// handed over, a report replaces the report still waiting right before
// it, and nothing else is replaced.
func TestStatusWritesOrderAndReplace(t *testing.T) {
	tests := []struct {
		name string
		adds []statusAdd
		want []string
	}{
		{"answers keep their order", []statusAdd{{"a1", false}, {"a2", false}, {"a3", false}}, []string{"a1", "a2", "a3"}},
		{"the newest of waiting reports", []statusAdd{{"r1", true}, {"r2", true}, {"r3", true}}, []string{"r3"}},
		{"a report does not pass an answer", []statusAdd{{"a1", false}, {"r1", true}, {"r2", true}, {"a2", false}, {"r3", true}},
			[]string{"a1", "r2", "a2", "r3"}},
		{"an answer never replaces", []statusAdd{{"r1", true}, {"a1", false}, {"a2", false}}, []string{"r1", "a1", "a2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newStatusWrites(slog.New(slog.DiscardHandler))
			var mu sync.Mutex
			var ran []string
			for _, a := range tt.adds {
				w.add("ns/work", func(context.Context) {
					mu.Lock()
					defer mu.Unlock()
					ran = append(ran, a.label)
				}, a.report)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { w.run(ctx, 4); close(done) }()
			last := make(chan struct{})
			w.add("ns/work", func(context.Context) { close(last) }, false)
			<-last
			cancel()
			<-done
			if diff := cmp.Diff(tt.want, ran); diff != "" {
				t.Errorf("writes run (-want +got):\n%s", diff)
			}
		})
	}
}

type statusAdd struct {
	label  string
	report bool
}

// TestStatusWritesOfOtherWorksGoOn: a Work whose write waits holds up
// only that Work's writes.
func TestStatusWritesOfOtherWorksGoOn(t *testing.T) {
	w := newStatusWrites(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx, 2); close(done) }()
	release, otherRan := make(chan struct{}), make(chan struct{})
	w.add("ns/slow", func(context.Context) { <-release }, false)
	w.add("ns/other", func(context.Context) { close(otherRan) }, false)
	<-otherRan // would wait forever were the slow Work's write in its way
	close(release)
	cancel()
	<-done
}
