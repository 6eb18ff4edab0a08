package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDatagramRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&LeaseRenew{Seq: 7, AgentTime: testTime},
		&LeaseAck{Seq: 1<<64 - 1, HubTime: testTime.Add(time.Millisecond)},
	} {
		b, err := EncodeDatagram(m)
		if err != nil {
			t.Fatalf("encode %v: %v", m.Type(), err)
		}
		got, err := DecodeDatagram(b)
		if err != nil {
			t.Fatalf("decode %v: %v", m.Type(), err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("%v round trip (-sent +read):\n%s", m.Type(), diff)
		}
	}
}

func TestDatagramRefusals(t *testing.T) {
	renew, err := EncodeDatagram(&LeaseRenew{Seq: 1, AgentTime: testTime})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrEmptyFrame},
		{"length only", []byte{0, 0, 0, 0}, ErrEmptyFrame},
		{"length longer than the datagram", append([]byte{0, 0, 1, 0}, renew[4:]...), ErrBadPayload},
		{"two frames", append(append([]byte{}, renew...), renew...), ErrBadPayload},
		{"too large", rawFrame(TypeLeaseRenew, `{"seq":1,"agentTime":"2026-01-01T00:00:00Z","x":"`+strings.Repeat("a", MaxDatagramFrame)+`"}`), ErrFrameTooLarge},
		{"a stream message", rawFrame(TypeHello, `{"protocolVersion":1,"clusterName":"a"}`), ErrInvalidMessage},
		{"unknown type", rawFrame(MessageType(250), `{}`), ErrUnknownMessageType},
		{"bad JSON", rawFrame(TypeLeaseRenew, `{"seq":`), ErrBadPayload},
		{"no time", rawFrame(TypeLeaseAck, `{"seq":1}`), ErrInvalidMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeDatagram(tc.data); !errors.Is(err, tc.want) {
				t.Errorf("DecodeDatagram: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := EncodeDatagram(&Hello{ProtocolVersion: Version, ClusterName: "a"}); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("EncodeDatagram(Hello): %v, want ErrInvalidMessage", err)
	}
	if _, err := EncodeDatagram((*LeaseAck)(nil)); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("EncodeDatagram(nil ack): %v, want ErrInvalidMessage", err)
	}
}

func FuzzDecodeDatagram(f *testing.F) {
	for _, m := range []Message{&LeaseRenew{Seq: 3, AgentTime: testTime}, &LeaseAck{Seq: 3, HubTime: testTime}} {
		b, err := EncodeDatagram(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(rawFrame(TypeHello, `{}`))
	f.Add([]byte("\x00\x00\x00\x02\x03{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeDatagram(data)
		if err != nil {
			return
		}
		again, err := EncodeDatagram(m)
		if err != nil {
			t.Fatalf("re-encode accepted %v: %v", m.Type(), err)
		}
		back, err := DecodeDatagram(again)
		if err != nil {
			t.Fatalf("decode re-encoded %v: %v", m.Type(), err)
		}
		if diff := cmp.Diff(m, back); diff != "" {
			t.Fatalf("re-encoded %v differs:\n%s", m.Type(), diff)
		}
	})
}
