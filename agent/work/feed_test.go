package work

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/protocol"
)

func TestFeed(t *testing.T) {
	var fs feeds
	fs.emit(&protocol.WorkDeleted{Name: "before"}) // nobody listens: dropped
	f := fs.subscribe()
	fs.emit(&protocol.WorkApplied{Name: "a", Generation: 1})
	fs.emit(&protocol.WorkStatus{Name: "a", Generation: 1})
	fs.emit(&protocol.WorkDeleted{Name: "b"})
	fs.emit(&protocol.WorkApplied{Name: "a", Generation: 2}) // replaces generation 1, behind the delete
	fs.emit(&protocol.WorkStatus{Name: "c", Generation: 1})

	select {
	case <-f.Ready():
	default:
		t.Fatal("feed not ready after messages were added")
	}
	var got []protocol.Message
	for m, ok := f.Pop(); ok; m, ok = f.Pop() {
		got = append(got, m)
	}
	want := []protocol.Message{
		&protocol.WorkStatus{Name: "a", Generation: 1},
		&protocol.WorkDeleted{Name: "b"},
		&protocol.WorkApplied{Name: "a", Generation: 2},
		&protocol.WorkStatus{Name: "c", Generation: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}

	f.Close()
	fs.emit(&protocol.WorkDeleted{Name: "after"})
	if m, ok := f.Pop(); ok {
		t.Errorf("closed feed got %v", m)
	}
}

func TestSameResults(t *testing.T) {
	base := protocol.ManifestResult{Ordinal: 0, Group: "apps", Version: "v1", Kind: "Deployment", Name: "web",
		Health: protocol.HealthHealthy, Status: []byte(`{"readyReplicas":3}`)}
	changed := func(f func(*protocol.ManifestResult)) []protocol.ManifestResult {
		r := base
		f(&r)
		return []protocol.ManifestResult{r}
	}
	for name, tc := range map[string]struct {
		other []protocol.ManifestResult
		same  bool
	}{
		"identical":     {changed(func(*protocol.ManifestResult) {}), true},
		"health":        {changed(func(r *protocol.ManifestResult) { r.Health = protocol.HealthUnhealthy }), false},
		"message":       {changed(func(r *protocol.ManifestResult) { r.Message = "why" }), false},
		"status fields": {changed(func(r *protocol.ManifestResult) { r.Status = []byte(`{"readyReplicas":2}`) }), false},
		"length":        {nil, false},
	} {
		if got := sameResults([]protocol.ManifestResult{base}, tc.other); got != tc.same {
			t.Errorf("%s: sameResults = %v, want %v", name, got, tc.same)
		}
	}
}
