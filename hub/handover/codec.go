package handover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Limits on what Decode accepts from a peer.
const (
	// MaxSessions is the most clusters a table may list.
	MaxSessions = 1 << 20
	// MaxNameBytes is the longest cluster or leader name (a DNS
	// subdomain is at most 253 bytes).
	MaxNameBytes = 253
)

// formatVersion leads every encoded table; a replica refuses a format it
// does not know rather than misreading it.
const formatVersion = 1

var errTruncated = errors.New("table truncated")

// Encode writes t as: the format version, the leader's name, the time
// taken (Unix nanoseconds), the number of sessions, then per session its
// cluster name, a renewing flag and its last renewal (Unix nanoseconds, 0
// for never). Names are length-prefixed, numbers varints.
func Encode(t *Table) []byte {
	buf := make([]byte, 0, 32+len(t.Sessions)*32)
	buf = append(buf, formatVersion)
	buf = appendString(buf, t.Leader)
	buf = binary.AppendVarint(buf, unixNanos(t.TakenAt))
	buf = binary.AppendUvarint(buf, uint64(len(t.Sessions)))
	for _, s := range t.Sessions {
		buf = appendString(buf, s.Cluster)
		renewing := byte(0)
		if s.Renewing {
			renewing = 1
		}
		buf = append(buf, renewing)
		buf = binary.AppendVarint(buf, unixNanos(s.LastRenewal))
	}
	return buf
}

// Decode reads a table written by Encode. It refuses anything malformed
// or beyond the limits, and trailing bytes.
func Decode(data []byte) (*Table, error) {
	r := reader{data: data}
	if v := r.byte(); r.err == nil && v != formatVersion {
		return nil, fmt.Errorf("decode session table: format version %d, want %d", v, formatVersion)
	}
	t := &Table{Leader: r.string("leader"), TakenAt: fromUnixNanos(r.varint())}
	n := r.uvarint()
	if r.err == nil && n > MaxSessions {
		return nil, fmt.Errorf("decode session table: %d sessions, at most %d", n, MaxSessions)
	}
	// Each session takes at least 3 bytes: never allocate more than the
	// input can hold.
	if r.err == nil && n > uint64(len(r.data)/3) {
		r.err = errTruncated
	}
	if r.err == nil && n > 0 {
		t.Sessions = make([]Session, 0, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		s := Session{Cluster: r.string("cluster")}
		switch flag := r.byte(); {
		case r.err != nil:
		case flag > 1:
			r.err = fmt.Errorf("session %d: renewing flag %d", i, flag)
		default:
			s.Renewing = flag == 1
		}
		s.LastRenewal = fromUnixNanos(r.varint())
		t.Sessions = append(t.Sessions, s)
	}
	if r.err == nil && len(r.data) > 0 {
		r.err = fmt.Errorf("%d bytes after the last session", len(r.data))
	}
	if r.err != nil {
		return nil, fmt.Errorf("decode session table: %w", r.err)
	}
	return t, nil
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// reader consumes data; the first error sticks and later reads return
// zero values.
type reader struct {
	data []byte
	err  error
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.data) == 0 {
		r.err = errTruncated
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.data)
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.data)
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.data = r.data[n:]
	return v
}

func (r *reader) string(what string) string {
	n := r.uvarint()
	switch {
	case r.err != nil:
		return ""
	case n > MaxNameBytes:
		r.err = fmt.Errorf("%s name of %d bytes, at most %d", what, n, MaxNameBytes)
		return ""
	case n > uint64(len(r.data)):
		r.err = errTruncated
		return ""
	}
	s := string(r.data[:n])
	r.data = r.data[n:]
	return s
}
