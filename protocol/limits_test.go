package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestAgentReaderLimitsEachKind reads frames an agent could send through
// NewAgentReader: each kind is refused above its own limit (before its
// payload is read) and accepted below it.
func TestAgentReaderLimitsEachKind(t *testing.T) {
	renew := &LeaseRenew{Seq: 1, AgentTime: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	bigStatus := &WorkStatus{Name: "w", Generation: 1}
	for i := range 100 {
		bigStatus.Manifests = append(bigStatus.Manifests, ManifestResult{Ordinal: i, Version: "v1", Kind: "ConfigMap", Name: "c", Health: HealthHealthy,
			Message: strings.Repeat("x", 4000), Status: []byte(`{"a":"` + strings.Repeat("y", 8000) + `"}`)})
	}
	// The most state an honest agent reports: every template at its
	// longest, every value at its bound, on the workload's manifest.
	mostState := &WorkStatus{Name: "w", Generation: 1, Manifests: []ManifestResult{{Version: "v1", Kind: "ConfigMap", Name: "c", Health: HealthHealthy,
		StateValues: map[string]string{}}}}
	for i := range MaxStatePaths {
		template := fmt.Sprintf("{.f%d}", i)
		template += strings.Repeat(" ", MaxStatePathBytes-len(template))
		mostState.Manifests[0].StateValues[template] = strings.Repeat("v", MaxStateValueBytes)
	}
	tests := []struct {
		name    string
		frame   []byte
		wantErr error
	}{
		{"small renewal", encode(t, renew), nil},
		{"work status with the most state values", encode(t, mostState), nil},
		{"renewal padded past 1 KiB", rawFrame(TypeLeaseRenew, `{"seq":1,"agentTime":"2026-11-26T12:00:00Z","pad":"`+strings.Repeat("p", 1100)+`"}`), ErrFrameTooLarge},
		{"hello past 16 KiB", rawFrame(TypeHello, `{"agentVersion":"`+strings.Repeat("v", 17<<10)+`"}`), ErrFrameTooLarge},
		{"work status of 1.2 MiB", encode(t, bigStatus), ErrFrameTooLarge},
		{"a hub-only message", rawFrame(TypeWelcome, `{"hubID":"`+strings.Repeat("h", 2<<10)+`"}`), ErrFrameTooLarge},
		{"frame past every limit", append([]byte{0, 0x50, 0, 0}, byte(TypeWorkInventory)), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The reader must refuse before reading the payload: a reader
			// that has only the length and type byte proves it.
			data := tt.frame
			if tt.wantErr != nil {
				data = data[:lengthSize+1]
			}
			_, err := NewAgentReader(iotest.OneByteReader(bytes.NewReader(data))).ReadMessage()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadMessage = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestAgentReaderKeepsFramesInStep reads back to back frames of every kind
// an agent sends through NewAgentReader.
func TestAgentReaderKeepsFramesInStep(t *testing.T) {
	var buf bytes.Buffer
	sent := 0
	for _, m := range sampleMessages() {
		if len(encode(t, m))-lengthSize > AgentMessageLimit(m.Type()) {
			continue
		}
		if err := WriteMessage(&buf, m); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	r := NewAgentReader(iotest.OneByteReader(&buf))
	got := 0
	for {
		_, err := r.ReadMessage()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("message %d: %v", got, err)
		}
		got++
	}
	if got != sent || sent < 5 {
		t.Errorf("read %d of %d messages", got, sent)
	}
}

func encode(t *testing.T, m Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
