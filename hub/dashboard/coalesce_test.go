package dashboard

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCoalescer(t *testing.T) {
	type op struct {
		put    bool
		key, v string
	}
	tests := []struct {
		name        string
		ops         []op
		wantPuts    map[string]string
		wantRemoved []string
	}{
		{"latest value wins", []op{{true, "a", "1"}, {true, "a", "2"}, {true, "b", "1"}}, map[string]string{"a": "2", "b": "1"}, nil},
		{"remove cancels an earlier put", []op{{true, "a", "1"}, {false, "a", ""}}, map[string]string{}, []string{"a"}},
		{"put cancels an earlier remove", []op{{false, "a", ""}, {true, "a", "3"}}, map[string]string{"a": "3"}, nil},
		{"nothing", nil, map[string]string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCoalescer[string]()
			for _, o := range tt.ops {
				if o.put {
					c.put(o.key, o.v)
				} else {
					c.remove(o.key)
				}
			}
			puts, removed := c.take()
			slices.Sort(removed)
			if diff := cmp.Diff(tt.wantPuts, puts); diff != "" {
				t.Errorf("puts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			again, gone := c.take()
			if len(again)+len(gone) != 0 {
				t.Errorf("second take = %v %v, want nothing", again, gone)
			}
		})
	}
}

// TestCoalescerSignalsOnce: many changes leave one wake-up, so a stream
// sends one batch for them.
func TestCoalescerSignalsOnce(t *testing.T) {
	c := newCoalescer[int]()
	for i := range 10000 {
		c.put("cluster", i)
	}
	select {
	case <-c.Ready():
	default:
		t.Fatal("no signal after puts")
	}
	select {
	case <-c.Ready():
		t.Fatal("a second signal for the same batch")
	default:
	}
	puts, _ := c.take()
	if diff := cmp.Diff(map[string]int{"cluster": 9999}, puts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestSubscriberDelta: a batch holds whole views, sorted, with bindings
// filtered by namespace and the zones only when they changed.
func TestSubscriberDelta(t *testing.T) {
	s := newSubscriber()
	s.clusters.put("b", ClusterView{Name: "b", Ready: "Unknown"})
	s.clusters.put("a", ClusterView{Name: "a", Ready: "True"})
	s.clusters.remove("gone")
	s.bindings.put("team-a/web", BindingView{Key: "team-a/web", Namespace: "team-a", Name: "web"})
	s.bindings.put("team-b/db", BindingView{Key: "team-b/db", Namespace: "team-b", Name: "db"})
	s.setZones(map[string]string{"default": "Normal"})
	d, any := s.delta(42, func(ns string) bool { return ns == "team-a" })
	want := Delta{
		Now:             42,
		Clusters:        []ClusterView{{Name: "a", Ready: "True"}, {Name: "b", Ready: "Unknown"}},
		RemovedClusters: []string{"gone"},
		Bindings:        []BindingView{{Key: "team-a/web", Namespace: "team-a", Name: "web"}},
		Zones:           map[string]string{"default": "Normal"},
	}
	if !any {
		t.Error("delta reported nothing pending")
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	if d, any := s.delta(43, func(string) bool { return true }); any {
		t.Errorf("second delta = %+v, want nothing", d)
	}
}
