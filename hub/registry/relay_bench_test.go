package registry

import (
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/hub/relay"
)

// BenchmarkRelayedRenewals is the leader's cost of renewals a standby
// relays, per renewal: a batch of 100 (a 10,000-agent standby's 100 ms at
// one renewal each 10 s) decoded and applied. Compare BenchmarkRenew, a
// renewal on the leader itself.
func BenchmarkRelayedRenewals(b *testing.B) {
	const perBatch = 100
	reg, clk, names := benchRegistry(5000)
	batch := &relay.Batch{Replica: "replica-b", HubID: "hub-b", Sessions: make([]relay.Session, perBatch)}
	for i := range batch.Sessions {
		batch.Sessions[i] = relay.Session{Cluster: names[i], Session: fmt.Sprintf("hub-b/%d", i), Remote: "198.51.100.7:4000", Transport: "quic",
			AgentVersion: "v-bench", LeaseSeconds: 40, ConnectedAt: t0}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perBatch {
		clk.Step(time.Millisecond)
		now := clk.Now()
		for j := range batch.Sessions {
			batch.Sessions[j].Cluster = names[(i+j)%len(names)]
			batch.Sessions[j].LastRenewal, batch.Sessions[j].AgentTime = now, now
		}
		msg, err := relay.Encode(batch)
		if err != nil {
			b.Fatal(err)
		}
		decoded, err := relay.Decode(msg)
		if err != nil {
			b.Fatal(err)
		}
		reg.ApplyRelayed(decoded)
	}
}

// BenchmarkRelayFullBatch is a standby's full list of 10,000 sessions:
// encoded on the standby, decoded and applied on the leader, per batch.
func BenchmarkRelayFullBatch(b *testing.B) {
	reg, clk, names := benchRegistry(10000)
	batch := &relay.Batch{Replica: "replica-b", HubID: "hub-b", Full: true, Sessions: make([]relay.Session, len(names))}
	for i, name := range names {
		batch.Sessions[i] = relay.Session{Cluster: name, Session: fmt.Sprintf("hub-b/%d", i), Remote: "198.51.100.7:4000", Transport: "quic",
			AgentVersion: "v-bench", LeaseSeconds: 40, ConnectedAt: t0, LastRenewal: t0, AgentTime: t0}
	}
	reg.ApplyRelayed(batch)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clk.Step(time.Millisecond)
		msg, err := relay.Encode(batch)
		if err != nil {
			b.Fatal(err)
		}
		decoded, err := relay.Decode(msg)
		if err != nil {
			b.Fatal(err)
		}
		reg.ApplyRelayed(decoded)
		b.ReportMetric(float64(len(msg)), "bytes/batch")
	}
}
