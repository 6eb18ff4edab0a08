package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(m.Type().String(), func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteMessage(&buf, m); err != nil {
				t.Fatalf("WriteMessage: %v", err)
			}
			got, err := NewReader(&buf, 0).ReadMessage()
			if err != nil {
				t.Fatalf("ReadMessage: %v", err)
			}
			if diff := cmp.Diff(m, got); diff != "" {
				t.Errorf("round trip (-sent +received):\n%s", diff)
			}
		})
	}
}

func TestBackToBackFrames(t *testing.T) {
	sent := sampleMessages()
	var buf bytes.Buffer
	for _, m := range sent {
		if err := WriteMessage(&buf, m); err != nil {
			t.Fatalf("WriteMessage(%v): %v", m.Type(), err)
		}
	}
	// OneByteReader forces every ReadFull to assemble frames piecewise, as
	// a network stream would.
	r := NewReader(iotest.OneByteReader(&buf), 0)
	var got []Message
	for {
		m, err := r.ReadMessage()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadMessage after %d messages: %v", len(got), err)
		}
		got = append(got, m)
	}
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("messages (-sent +received):\n%s", diff)
	}
}

func TestFrameLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMessage(&buf, &GoAway{Reason: "<bye>"}); err != nil {
		t.Fatal(err)
	}
	// No HTML escaping and no trailing newline from json.Encoder.
	want := rawFrame(TypeGoAway, `{"reason":"<bye>"}`)
	if diff := cmp.Diff(want, buf.Bytes()); diff != "" {
		t.Errorf("frame (-want +got):\n%s", diff)
	}
}

func TestJSONFieldNames(t *testing.T) {
	m := &ClusterStatus{ObservedAt: testTime, APIServerHealthy: true, NodesTotal: 1}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"observedAt", "kubernetesVersion", "apiServerHealthy", "healthMessage",
		"nodesTotal", "nodesReady", "allocatable", "allocated"} {
		if _, ok := fields[name]; !ok {
			t.Errorf("field %q missing from %s", name, b)
		}
	}
	if got, want := fields["observedAt"], "2026-11-22T21:04:05.123456789+01:00"; got != want {
		t.Errorf("observedAt = %v, want %v", got, want)
	}
}

// countingWriter records each Write call separately.
type countingWriter struct {
	writes [][]byte
	err    error
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

func TestWriteMessageSingleWrite(t *testing.T) {
	for _, m := range sampleMessages() {
		var w countingWriter
		if err := WriteMessage(&w, m); err != nil {
			t.Fatalf("WriteMessage(%v): %v", m.Type(), err)
		}
		if len(w.writes) != 1 {
			t.Errorf("WriteMessage(%v) made %d Write calls, want 1", m.Type(), len(w.writes))
		}
	}
}

func TestWriteMessageErrors(t *testing.T) {
	errBroken := errors.New("stream reset")
	tests := []struct {
		name    string
		w       countingWriter
		m       Message
		wantErr error
		writes  int
	}{
		{name: "writer fails", w: countingWriter{err: errBroken}, m: &GoAway{}, wantErr: errBroken, writes: 1},
		{name: "nil interface", m: nil, wantErr: ErrInvalidMessage},
		{name: "typed nil", m: (*Hello)(nil), wantErr: ErrInvalidMessage},
		{name: "foreign type", m: foreignMessage{}, wantErr: ErrUnknownMessageType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteMessage(&tt.w, tt.m)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("WriteMessage error = %v, want %v", err, tt.wantErr)
			}
			if len(tt.w.writes) != tt.writes {
				t.Errorf("%d Write calls, want %d", len(tt.w.writes), tt.writes)
			}
		})
	}
}

type foreignMessage struct{}

func (foreignMessage) Type() MessageType { return 42 }

func TestEncodeFrameLimit(t *testing.T) {
	m := &GoAway{Reason: strings.Repeat("x", 100)}
	frame, err := encodeFrame(m, 1000)
	if err != nil {
		t.Fatalf("under the limit: %v", err)
	}
	limit := len(frame) - lengthSize - 1
	_, err = encodeFrame(m, limit)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("over the limit: error = %v, want ErrFrameTooLarge", err)
	}
	for _, want := range []string{"GoAway", "exceeds the limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReadMessageRejects(t *testing.T) {
	hello := string(rawFrame(TypeHello, `{"protocolVersion":1,"clusterName":"member-1"}`))
	tests := []struct {
		name     string
		input    string
		max      int
		wantErr  error
		wantText string
	}{
		{name: "clean EOF", input: "", wantErr: io.EOF},
		{name: "EOF in length", input: "\x00\x00", wantErr: io.ErrUnexpectedEOF},
		{name: "EOF before body", input: "\x00\x00\x00\x05", wantErr: io.ErrUnexpectedEOF},
		{name: "EOF in body", input: hello[:len(hello)-3], wantErr: io.ErrUnexpectedEOF},
		{name: "zero length", input: "\x00\x00\x00\x00", wantErr: ErrEmptyFrame},
		{name: "4 GiB length", input: "\xff\xff\xff\xff\x01{}", wantErr: ErrFrameTooLarge,
			wantText: "4294967295 bytes exceeds the limit of 1048576 bytes"},
		{name: "over custom limit", input: hello, max: 10, wantErr: ErrFrameTooLarge,
			wantText: "exceeds the limit of 10 bytes"},
		{name: "limit clamped to hard max", input: "\x04\x00\x00\x01\x01", max: 1 << 40, wantErr: ErrFrameTooLarge,
			wantText: "limit of 67108864 bytes"},
		{name: "unknown type", input: string(rawFrame(99, `{}`)), wantErr: ErrUnknownMessageType,
			wantText: "unknown message type 99"},
		{name: "type zero", input: string(rawFrame(0, `{}`)), wantErr: ErrUnknownMessageType},
		{name: "garbage JSON", input: string(rawFrame(TypeLeaseAck, `{"seq":`)), wantErr: ErrBadPayload,
			wantText: "LeaseAck"},
		{name: "empty payload", input: string(rawFrame(TypeGoAway, ``)), wantErr: ErrBadPayload},
		{name: "JSON array", input: string(rawFrame(TypeGoAway, `[]`)), wantErr: ErrBadPayload},
		{name: "trailing data", input: string(rawFrame(TypeGoAway, `{} {}`)), wantErr: ErrBadPayload},
		{name: "wrong field type", input: string(rawFrame(TypeLeaseRenew, `{"seq":-1}`)), wantErr: ErrBadPayload},
		{name: "bad time", input: string(rawFrame(TypeLeaseRenew, `{"agentTime":"yesterday"}`)), wantErr: ErrBadPayload},
		{name: "null payload fails validation", input: string(rawFrame(TypeHello, `null`)), wantErr: ErrInvalidMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewReader(strings.NewReader(tt.input), tt.max).ReadMessage()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadMessage() = %v, %v; want error %v", m, err, tt.wantErr)
			}
			if tt.wantErr == io.EOF && err != io.EOF {
				t.Errorf("clean EOF was wrapped: %v", err)
			}
			if m != nil {
				t.Errorf("ReadMessage returned message %v with error", m)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

// A hostile length prefix must be rejected before any buffer of that size
// exists. Not parallel, so other tests' allocations do not count.
func TestReadMessageDoesNotAllocateClaimedLength(t *testing.T) {
	for _, input := range []string{"\xff\xff\xff\xff\x01{}", "\x00\x20\x00\x00\x01{}"} { // 4 GiB, 2 MiB
		r := NewReader(strings.NewReader(input), 0)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := r.ReadMessage()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("error = %v, want ErrFrameTooLarge", err)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<10 {
			t.Errorf("rejecting length %x allocated %d bytes", input[:4], allocated)
		}
	}
}

// Unknown fields come from newer peers and must not break older ones.
func TestReadMessageIgnoresUnknownFields(t *testing.T) {
	input := rawFrame(TypeHello, `{"protocolVersion":2,"clusterName":"member-1","workInventory":[{"name":"x"}]}`)
	got, err := NewReader(bytes.NewReader(input), 0).ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	want := &Hello{ProtocolVersion: 2, ClusterName: "member-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// After a frame is rejected for its content the reader is still at a frame
// boundary, so a caller may report the problem and keep reading.
func TestReadMessageStaysInStepAfterContentErrors(t *testing.T) {
	var input []byte
	input = append(input, rawFrame(77, `{}`)...)
	input = append(input, rawFrame(TypeGoAway, `{`)...)
	input = append(input, rawFrame(TypeError, `{}`)...)
	input = append(input, rawFrame(TypeGoAway, `{"reason":"done"}`)...)
	r := NewReader(bytes.NewReader(input), 0)
	for _, wantErr := range []error{ErrUnknownMessageType, ErrBadPayload, ErrInvalidMessage} {
		if _, err := r.ReadMessage(); !errors.Is(err, wantErr) {
			t.Fatalf("error = %v, want %v", err, wantErr)
		}
	}
	got, err := r.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&GoAway{Reason: "done"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The reader reuses its buffer; messages already returned must not change.
func TestReadMessageDoesNotAlias(t *testing.T) {
	var buf bytes.Buffer
	for _, reason := range []string{"aaaa", "bbbb"} {
		if err := WriteMessage(&buf, &GoAway{Reason: reason}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf, 0)
	first, err := r.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&GoAway{Reason: "aaaa"}, first); diff != "" {
		t.Errorf("first message changed after the second read (-want +got):\n%s", diff)
	}
}

func TestReaderRetainsOnlySmallBuffers(t *testing.T) {
	// The large frame fails validation, but only after it has been read into
	// a buffer, which is what this test is about.
	var input []byte
	for _, size := range []int{100, maxRetainedBuffer * 2} {
		input = append(input, rawFrame(TypeGoAway, `{"reason":"`+strings.Repeat("x", size)+`"}`)...)
	}
	r := NewReader(bytes.NewReader(input), 0)
	if _, err := r.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadMessage(); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("error = %v, want ErrInvalidMessage", err)
	}
	if cap(r.buf) > maxRetainedBuffer {
		t.Errorf("reader kept a %d-byte buffer, limit %d", cap(r.buf), maxRetainedBuffer)
	}
}

func TestMessageTypeString(t *testing.T) {
	tests := []struct {
		t    MessageType
		want string
	}{
		{TypeHello, "Hello"}, {TypeWelcome, "Welcome"}, {TypeLeaseRenew, "LeaseRenew"},
		{TypeLeaseAck, "LeaseAck"}, {TypeClusterStatus, "ClusterStatus"}, {TypeGoAway, "GoAway"},
		{TypeError, "Error"}, {TypeJoinRequest, "JoinRequest"}, {TypeJoinResponse, "JoinResponse"},
		{TypeCertificateRenewRequest, "CertificateRenewRequest"}, {TypeCertificateRenewResponse, "CertificateRenewResponse"},
		{0, "MessageType(0)"}, {200, "MessageType(200)"},
	}
	for _, tt := range tests {
		if got := tt.t.String(); got != tt.want {
			t.Errorf("MessageType(%d).String() = %q, want %q", uint8(tt.t), got, tt.want)
		}
	}
}

func TestErrorAsGoError(t *testing.T) {
	var err error = &Error{Code: CodeUnsupportedVersion, Message: "hub speaks version 1"}
	if got, want := err.Error(), "flotilla peer error UnsupportedVersion: hub speaks version 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var perr *Error
	if !errors.As(err, &perr) || perr.Code != CodeUnsupportedVersion {
		t.Errorf("errors.As did not recover the code from %v", err)
	}
}
