package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestStreamKindRoundTrip(t *testing.T) {
	for _, k := range []StreamKind{StreamControl, StreamStatus, StreamWork, StreamJoin, StreamRenew} {
		var buf bytes.Buffer
		if err := WriteStreamKind(&buf, k); err != nil {
			t.Fatalf("WriteStreamKind(%v): %v", k, err)
		}
		if buf.Len() != 1 {
			t.Errorf("WriteStreamKind(%v) wrote %d bytes, want 1", k, buf.Len())
		}
		got, err := ReadStreamKind(&buf)
		if err != nil {
			t.Fatalf("ReadStreamKind: %v", err)
		}
		if got != k {
			t.Errorf("ReadStreamKind = %v, want %v", got, k)
		}
	}
}

func TestStreamKindRejects(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		wantErr  error
		wantText string
	}{
		{name: "empty stream", input: "", wantErr: io.EOF},
		{name: "zero", input: "\x00", wantErr: ErrUnknownStreamKind, wantText: "unknown stream kind 0"},
		{name: "future kind", input: "\x06", wantErr: ErrUnknownStreamKind, wantText: "unknown stream kind 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadStreamKind(strings.NewReader(tt.input))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadStreamKind error = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

func TestWriteStreamKindRejectsUnknown(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteStreamKind(&buf, 9); !errors.Is(err, ErrUnknownStreamKind) {
		t.Errorf("WriteStreamKind(9) error = %v, want ErrUnknownStreamKind", err)
	}
	if buf.Len() != 0 {
		t.Errorf("WriteStreamKind(9) wrote %d bytes", buf.Len())
	}
}

func TestStreamKindString(t *testing.T) {
	for k, want := range map[StreamKind]string{StreamControl: "control", StreamStatus: "status", StreamWork: "work", StreamJoin: "join", StreamRenew: "renew", 7: "StreamKind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("StreamKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
