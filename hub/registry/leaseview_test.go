package registry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRenewalRing(t *testing.T) {
	base := time.Unix(100, 0)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	tests := []struct {
		name  string
		adds  int
		first int // the oldest kept
	}{
		{"empty", 0, 0},
		{"partly filled", 3, 0},
		{"full", renewalHistory, 0},
		{"wrapped", renewalHistory + 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r renewalRing
			for i := range tt.adds {
				r.add(at(i))
			}
			want := []time.Time{}
			for i := tt.first; i < tt.adds; i++ {
				want = append(want, at(i))
			}
			if diff := cmp.Diff(want, r.list()); diff != "" {
				t.Errorf("list (-want +got):\n%s", diff)
			}
		})
	}
}
