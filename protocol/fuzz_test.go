package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func FuzzReadMessage(f *testing.F) {
	var all []byte
	for _, m := range sampleMessages() {
		var buf bytes.Buffer
		if err := WriteMessage(&buf, m); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
		all = append(all, buf.Bytes()...)
	}
	f.Add(all)
	for _, garbage := range [][]byte{
		nil,
		[]byte("\x00\x00\x00\x00"),
		[]byte("\xff\xff\xff\xff\x01{}"),
		[]byte("\x00\x00\x00\x03\x09{}"),
		rawFrame(TypeHello, `{"protocolVersion":1,"clusterName":"a","x":[1,{"y":null}]}`),
		rawFrame(TypeClusterStatus, `{"observedAt":"0001-01-01T00:00:00.000000001Z","allocatable":{"cpu":"1e3"}}`),
		rawFrame(TypeWelcome, `{"hubTime":"9999-12-31T23:59:59+23:59","hubID":"\u003c"}`),
		rawFrame(TypeError, "{\"code\":\"\\ud800\",\"message\":\"\xff\"}"), // lone surrogate, invalid UTF-8
		// stopAfterSeconds overflows int32; then one over the limit.
		rawFrame(TypeWorkUpsert, `{"name":"w","generation":1,"manifests":[],"stopAfterSeconds":4294967296}`),
		rawFrame(TypeWorkUpsert, `{"name":"w","generation":1,"stopAfterSeconds":2592001}`),
		rawFrame(TypeWorkUpsert, `{"name":"w","generation":1,"statePaths":["{.a}","",null]}`),
		rawFrame(TypeWorkStatus, `{"name":"w","generation":1,"manifests":[{"name":"x","health":"Healthy","stateValues":{"{.a}":"1","":"2","{.b}":null}}]}`),
		rawFrame(TypeWorkApplied, `{"name":"w","generation":1,"applied":true,"manifests":[{"name":"x","health":"Healthy","stateValues":["x"]}]}`),
		rawFrame(TypeCertificateRenewRequest, `{"csr":""}`),
		rawFrame(TypeCertificateRenewRequest, `{"csr":"AAAA","extra":1}`),
		rawFrame(TypeCertificateRenewResponse, `{"certificate":"!!","caCertificate":"Y2E="}`),
		rawFrame(TypeWorkInventory, `{"works":[{"name":"w","generation":1,"fenced":"yes"},{"name":"v","generation":2,"fenced":true}]}`),
	} {
		f.Add(garbage)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		readAll(t, NewReader(bytes.NewReader(data), 64<<10))
		readAll(t, NewAgentReader(bytes.NewReader(data)))
	})
}

// readAll reads r to its end, checking every message and error.
func readAll(t *testing.T, r *Reader) {
	t.Helper()
	for {
		m, err := r.ReadMessage()
		switch {
		case err == nil:
			checkReencode(t, m)
		case errors.Is(err, ErrUnknownMessageType), errors.Is(err, ErrBadPayload), errors.Is(err, ErrInvalidMessage):
			// The frame was consumed; the next one can still be read.
		case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF),
			errors.Is(err, ErrEmptyFrame), errors.Is(err, ErrFrameTooLarge):
			return
		default:
			t.Fatalf("ReadMessage returned an error of no documented kind: %v", err)
		}
	}
}

// checkReencode asserts that a message accepted from the wire survives being
// sent on: it encodes, decodes and validates to an equal message.
func checkReencode(t *testing.T, m Message) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteMessage(&buf, m); err != nil {
		t.Fatalf("re-encode accepted %v: %v", m.Type(), err)
	}
	again, err := NewReader(&buf, HardMaxFrameSize).ReadMessage()
	if err != nil {
		t.Fatalf("decode re-encoded %v: %v\nframe: %q", m.Type(), err, buf.Bytes())
	}
	if diff := cmp.Diff(m, again); diff != "" {
		t.Fatalf("re-encoded %v differs (-first +second):\n%s", m.Type(), diff)
	}
}
