package scheduling

import (
	"testing"

	"github.com/flotilla-io/flotilla/scheduler"
)

func TestOverflowNote(t *testing.T) {
	tests := []struct {
		name  string
		tiers []scheduler.Tier
		want  string
	}{
		{"no tiers", nil, ""},
		{"the primary tier holds them", []scheduler.Tier{{Name: "idc", Replicas: 4}, {Name: "cloud"}}, ""},
		{"one overflow tier", []scheduler.Tier{{Name: "idc", Clusters: []string{"idc-1"}, Replicas: 6}, {Name: "cloud", Replicas: 4}}, "; idc full, overflow to cloud: 4"},
		{"two, one of them unused", []scheduler.Tier{{Name: "idc", Clusters: []string{"idc-1"}, Replicas: 6}, {Name: "cloud"}, {Name: "spare", Replicas: 2}},
			"; idc full, overflow to spare: 2"},
		{"two", []scheduler.Tier{{Name: "idc", Clusters: []string{"idc-1"}, Replicas: 6}, {Name: "cloud", Replicas: 10}, {Name: "spare", Replicas: 2}},
			"; idc full, overflow to cloud: 10, spare: 2"},
		{"no primary cluster fits", []scheduler.Tier{{Name: "idc", Clusters: []string{}}, {Name: "cloud", Replicas: 4}},
			"; no cluster of idc fits, overflow to cloud: 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := overflowNote(tt.tiers); got != tt.want {
				t.Errorf("overflowNote = %q, want %q", got, tt.want)
			}
		})
	}
}
