package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWrites: every write lands whole while readers read (run
// with -race).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			fmt.Fprintf(&b, "line %d\n", i)
			_ = b.String()
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 8 {
		t.Errorf("%d lines, want 8:\n%s", got, b.String())
	}
}
