package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// Frame size limits. A frame's size is its length field: the type byte plus
// the payload, not counting the 4 length bytes.
const (
	// DefaultMaxFrameSize is the reader's limit unless told otherwise. It is
	// far above any message in this version; it bounds what one peer can make
	// the other buffer.
	DefaultMaxFrameSize = 1 << 20
	// HardMaxFrameSize is the largest frame this package writes or reads,
	// whatever limit a Reader was given.
	HardMaxFrameSize = 64 << 20
)

const (
	lengthSize = 4
	// maxRetainedBuffer is the largest read buffer a Reader keeps between
	// frames. The hub holds a Reader per stream for thousands of agents, so
	// one large frame must not pin a large buffer for the connection's life.
	maxRetainedBuffer = 64 << 10
)

// WriteMessage encodes m as one frame and writes it with a single Write call,
// so that writers sharing a stream under a mutex never interleave frames and a
// failed encoding writes nothing. It does not call Validate: the receiving
// Reader does, and a sender that builds messages from untrusted input should
// call Validate itself.
func WriteMessage(w io.Writer, m Message) error {
	frame, err := encodeFrame(m, HardMaxFrameSize)
	if err != nil {
		return err
	}
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("write %v frame: %w", m.Type(), err)
	}
	return nil
}

// encodeFrame builds the complete frame for m, refusing frames above limit.
func encodeFrame(m Message, limit int) ([]byte, error) {
	if m == nil || isNilPointer(m) {
		return nil, fmt.Errorf("%w: nil %T", ErrInvalidMessage, m)
	}
	t := m.Type()
	if _, ok := messageTypeNames[t]; !ok {
		return nil, fmt.Errorf("encode %T: %w %d", m, ErrUnknownMessageType, uint8(t))
	}
	var buf bytes.Buffer
	buf.Write(make([]byte, lengthSize)) // the length is filled in below
	buf.WriteByte(byte(t))
	enc := json.NewEncoder(&buf)
	// HTML escaping would only make frames larger; nothing renders them.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode %v: %w", t, err)
	}
	frame := bytes.TrimSuffix(buf.Bytes(), []byte("\n")) // Encode adds a newline
	size := len(frame) - lengthSize
	if size > limit {
		return nil, fmt.Errorf("encode %v: %w: %d bytes exceeds the limit of %d bytes", t, ErrFrameTooLarge, size, limit)
	}
	binary.BigEndian.PutUint32(frame, uint32(size))
	return frame, nil
}

// isNilPointer reports whether m is a typed nil pointer, which JSON would
// silently encode as null.
func isNilPointer(m Message) bool {
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Reader reads frames from a stream and decodes them into messages. It is not
// safe for concurrent use; each stream has one reading goroutine.
type Reader struct {
	r            io.Reader
	maxFrameSize uint32
	length       [lengthSize]byte
	buf          []byte
	// typeLimit, if set, bounds each message kind (NewAgentReader).
	typeLimit func(MessageType) int
}

// NewReader returns a Reader that rejects frames larger than maxFrameSize.
// Zero (or less) means DefaultMaxFrameSize; values above HardMaxFrameSize are
// clamped to it.
func NewReader(r io.Reader, maxFrameSize int) *Reader {
	switch {
	case maxFrameSize <= 0:
		maxFrameSize = DefaultMaxFrameSize
	case maxFrameSize > HardMaxFrameSize:
		maxFrameSize = HardMaxFrameSize
	}
	return &Reader{r: r, maxFrameSize: uint32(maxFrameSize)}
}

// ReadMessage reads one frame and returns its decoded, validated message.
//
// At a clean end of stream (no byte of a new frame read) it returns io.EOF
// itself; a stream that ends inside a frame gives io.ErrUnexpectedEOF. After
// ErrUnknownMessageType, ErrBadPayload or ErrInvalidMessage the whole frame
// has been consumed and the stream is still in step; after any other error it
// is not, and the stream should be closed.
func (r *Reader) ReadMessage() (Message, error) {
	body, err := r.readFrame()
	if err != nil {
		return nil, err
	}
	return decode(MessageType(body[0]), body[1:])
}

// readFrame returns the type byte and payload of the next frame. The result
// aliases r.buf and is only valid until the next call.
func (r *Reader) readFrame() ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.length[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF // the peer ended the stream between frames
		}
		return nil, fmt.Errorf("read frame length: %w", err)
	}
	size := binary.BigEndian.Uint32(r.length[:])
	if size == 0 {
		return nil, fmt.Errorf("read frame: %w", ErrEmptyFrame)
	}
	// Check before allocating: the length is the peer's claim, not a fact.
	if size > r.maxFrameSize {
		return nil, fmt.Errorf("read frame: %w: %d bytes exceeds the limit of %d bytes", ErrFrameTooLarge, size, r.maxFrameSize)
	}
	var typ [1]byte
	if r.typeLimit != nil {
		// The type byte first, before allocating: its kind's limit may
		// be far below the frame limit.
		if _, err := io.ReadFull(r.r, typ[:]); err != nil {
			return nil, fmt.Errorf("read %d-byte frame: %w", size, unexpectedEOF(err))
		}
		if err := r.checkTypeLimit(MessageType(typ[0]), size); err != nil {
			return nil, err
		}
	}
	body := r.buffer(int(size))
	rest := body
	if r.typeLimit != nil {
		body[0] = typ[0]
		rest = body[1:]
	}
	if _, err := io.ReadFull(r.r, rest); err != nil {
		return nil, fmt.Errorf("read %d-byte frame: %w", size, unexpectedEOF(err))
	}
	return body, nil
}

// unexpectedEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF: the
// length promised more bytes.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// buffer returns a slice of n bytes, reusing the Reader's buffer when it is
// large enough and keeping new buffers only up to maxRetainedBuffer.
func (r *Reader) buffer(n int) []byte {
	if cap(r.buf) >= n {
		return r.buf[:n]
	}
	b := make([]byte, n)
	if n <= maxRetainedBuffer {
		r.buf = b
	}
	return b
}

// decode turns a payload into a validated message. encoding/json copies
// strings and builds fresh maps, so the result never aliases payload.
func decode(t MessageType, payload []byte) (Message, error) {
	m, err := newMessage(t)
	if err != nil {
		return nil, fmt.Errorf("read frame: %w", err)
	}
	if err := json.Unmarshal(payload, m); err != nil {
		return nil, fmt.Errorf("%w: decode %v: %w", ErrBadPayload, t, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}
