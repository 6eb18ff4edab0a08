package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/protocol"
)

func sampleBatch() *Batch {
	at := time.Date(2026, 11, 28, 12, 0, 0, 123456789, time.UTC)
	return &Batch{Replica: "hub-b_0a1b2c3d", HubID: "hub-b", Full: true, Sessions: []Session{
		{Cluster: "member-1", Session: "hub-b/1", Remote: "10.0.0.1:4242", Transport: "quic", AgentVersion: "v0.1.0", LeaseSeconds: 10,
			ConnectedAt: at, LastRenewal: at.Add(time.Second), AgentTime: at.Add(1100 * time.Millisecond),
			Status: &protocol.ClusterStatus{ObservedAt: at, APIServerHealthy: true, NodesTotal: 3, NodesReady: 3, Allocatable: map[string]string{"cpu": "8"}}},
		{Cluster: "member-2", Session: "hub-b/2", Ended: "connection closed"},
		{Cluster: "member-3", Session: "hub-b/3", Dropped: true},
	}}
}

func TestRoundTrip(t *testing.T) {
	want := sampleBatch()
	msg, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !IsBatch(msg) {
		t.Fatal("an encoded batch is not recognised")
	}
	got, err := Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeRefuses(t *testing.T) {
	encode := func(edit func(*Batch)) []byte {
		b := sampleBatch()
		edit(b)
		msg, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"a handover table", []byte{1, 2, 3}, "not a relay batch"},
		{"not JSON", append([]byte("FLR1"), "{"...), "relay batch"},
		{"no replica", encode(func(b *Batch) { b.Replica = "" }), "replica of 0 bytes"},
		{"no hub ID", encode(func(b *Batch) { b.HubID = "" }), "hubID of 0 bytes"},
		{"a long cluster name", encode(func(b *Batch) { b.Sessions[0].Cluster = strings.Repeat("a", 254) }), "cluster of 254 bytes"},
		{"no session id", encode(func(b *Batch) { b.Sessions[1].Session = "" }), "session id of 0 bytes"},
		{"a long reason", encode(func(b *Batch) { b.Sessions[1].Ended = strings.Repeat("x", 2000) }), "ended of 2000 bytes"},
		{"a negative lease", encode(func(b *Batch) { b.Sessions[0].LeaseSeconds = -1 }), "negative lease"},
		{"an invalid status", encode(func(b *Batch) { b.Sessions[0].Status.NodesReady = 9 }), "status"},
		{"two live sessions of a cluster", encode(func(b *Batch) { b.Sessions[2].Cluster, b.Sessions[2].Dropped = "member-1", false }), "a second live session of cluster member-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.msg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	msg, err := Encode(sampleBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add([]byte("FLR1{}"))
	f.Add([]byte("FLR1{\"sessions\":[{}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data)
		if err != nil {
			return
		}
		// What decodes encodes and decodes to the same batch.
		again, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("a decoded batch does not decode again: %v", err)
		}
	})
}

func TestEndRoundTripAndRefusals(t *testing.T) {
	want := End{Cluster: "member-1", Session: "hub-b/7", Reason: "replaced by a newer session"}
	msg, err := EncodeEnd(want)
	if err != nil {
		t.Fatal(err)
	}
	if !IsEnd(msg) || IsBatch(msg) {
		t.Fatalf("an encoded End: IsEnd %v, IsBatch %v", IsEnd(msg), IsBatch(msg))
	}
	got, err := DecodeEnd(msg)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]string{
		"no cluster":  `{"session":"s"}`,
		"no session":  `{"cluster":"c"}`,
		"long reason": `{"cluster":"c","session":"s","reason":"` + strings.Repeat("x", 1100) + `"}`,
		"not JSON":    `{`,
	} {
		if _, err := DecodeEnd(append([]byte("FLE1"), bad...)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzDecodeEnd(f *testing.F) {
	msg, err := EncodeEnd(End{Cluster: "member-1", Session: "hub-b/7", Reason: "r"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEnd(data)
		if err != nil {
			return
		}
		again, err := EncodeEnd(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeEnd(again); err != nil {
			t.Fatalf("a decoded End does not decode again: %v", err)
		}
	})
}
