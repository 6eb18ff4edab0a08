package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// End is the leader telling a replica to end one of its agent sessions:
// a newer session of the same cluster serves it elsewhere (one session
// per cluster across the replicas).
type End struct {
	Cluster string `json:"cluster"`
	Session string `json:"session"`
	Reason  string `json:"reason"`
}

// endMagic leads every encoded End.
var endMagic = []byte("FLE1")

// maxEndBytes bounds an encoded End (three bounded strings, each up to
// six bytes a character once escaped).
const maxEndBytes = 16 << 10 // its strings escaped

// IsEnd reports whether msg claims to be an encoded End.
func IsEnd(msg []byte) bool { return bytes.HasPrefix(msg, endMagic) }

// EncodeEnd returns e in its wire form.
func EncodeEnd(e End) ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode session end: %w", err)
	}
	return append(append(make([]byte, 0, len(endMagic)+len(body)), endMagic...), body...), nil
}

// DecodeEnd reads an End a replica sent and checks it.
func DecodeEnd(msg []byte) (End, error) {
	body, ok := bytes.CutPrefix(msg, endMagic)
	switch {
	case !ok:
		return End{}, errors.New("not a session end")
	case len(msg) > maxEndBytes:
		return End{}, fmt.Errorf("session end of %d bytes, at most %d", len(msg), maxEndBytes)
	}
	var e End
	if err := json.Unmarshal(body, &e); err != nil {
		return End{}, fmt.Errorf("session end: %w", err)
	}
	if err := name("cluster", e.Cluster); err != nil {
		return End{}, fmt.Errorf("session end: %w", err)
	}
	if e.Session == "" || len(e.Session) > maxTextBytes || len(e.Reason) > maxTextBytes {
		return End{}, fmt.Errorf("session end of %s: session id of %d bytes (want 1-%d), reason of %d (at most %d)",
			e.Cluster, len(e.Session), maxTextBytes, len(e.Reason), maxTextBytes)
	}
	return e, nil
}

// resyncMagic is the whole of a Resync request: the leader asks a
// replica for a full batch (it dropped one of its batches, or has not had
// a full one from it since it began to lead).
var resyncMagic = []byte("FLQ1")

// Resync is the encoded request for a full batch.
func Resync() []byte { return bytes.Clone(resyncMagic) }

// IsResync reports whether msg is a Resync request.
func IsResync(msg []byte) bool { return bytes.Equal(msg, resyncMagic) }
