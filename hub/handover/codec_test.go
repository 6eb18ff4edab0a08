package handover

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 30, 0, 123456789, time.UTC)
	tests := []struct {
		name  string
		table Table
	}{
		{"empty", Table{Leader: "hub-0-ab12", TakenAt: at}},
		{"sessions", Table{Leader: "hub-1-cd34", TakenAt: at, Sessions: []Session{
			{Cluster: "member-1", Renewing: true, LastRenewal: at.Add(-time.Second)},
			{Cluster: "member-2", LastRenewal: at.Add(-25 * time.Second)},
			{Cluster: "never-renewed"},
		}}},
		{"names at the limit", Table{Leader: strings.Repeat("h", MaxNameBytes), TakenAt: at, Sessions: []Session{
			{Cluster: strings.Repeat("c", MaxNameBytes), Renewing: true, LastRenewal: at},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(Encode(&tt.table))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.table, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := Encode(&Table{Leader: "hub", TakenAt: time.Unix(100, 0), Sessions: []Session{{Cluster: "m1", Renewing: true, LastRenewal: time.Unix(99, 0)}}})
	longName := append([]byte{formatVersion}, appendString(nil, strings.Repeat("x", MaxNameBytes+1))...)
	tooMany := []byte{formatVersion, 0, 0}
	tooMany = binary.AppendUvarint(tooMany, MaxSessions+1)
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "truncated"},
		{"another format", "\x02", "format version 2"},
		{"truncated", string(good[:len(good)-1]), "truncated"},
		{"trailing bytes", string(good) + "x", "1 bytes after the last session"},
		{"name too long", string(longName), "leader name of 254 bytes"},
		{"too many sessions", string(tooMany), "at most 1048576"},
		{"more sessions than bytes", "\x01\x00\x00\x64", "truncated"},
		{"bad renewing flag", strings.Replace(string(good), "m1\x01", "m1\x07", 1), "renewing flag 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%q) = %v, want an error with %q", tt.data, err, tt.want)
			}
		})
	}
}

func TestFreshAt(t *testing.T) {
	taken := time.Unix(1000, 0)
	table := Table{TakenAt: taken}
	for _, tt := range []struct {
		now  time.Time
		want bool
	}{
		{taken, true},
		{taken.Add(20 * time.Second), true},
		{taken.Add(20*time.Second + 1), false},
		{taken.Add(-20 * time.Second), true}, // a peer's clock a little ahead
		{taken.Add(-21 * time.Second), false},
	} {
		if got := table.FreshAt(tt.now, 20*time.Second); got != tt.want {
			t.Errorf("FreshAt(taken%+v) = %v, want %v", tt.now.Sub(taken), got, tt.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(&Table{Leader: "hub", TakenAt: time.Unix(5, 6), Sessions: []Session{{Cluster: "m1", Renewing: true, LastRenewal: time.Unix(4, 0)}, {Cluster: "m2"}}}))
	f.Add([]byte{formatVersion})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		table, err := Decode(data)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes, except for
		// non-minimal varints, and decodes to the same table.
		again, err := Decode(Encode(table))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(Encode(again), Encode(table)) {
			t.Fatal("re-encoded table differs")
		}
		if len(table.Sessions) > len(data)/3 {
			t.Fatalf("%d sessions from %d bytes", len(table.Sessions), len(data))
		}
	})
}
