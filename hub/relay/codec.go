package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Limits on what Decode accepts.
const (
	// MaxBatchBytes is the largest encoded batch: memberlist refuses
	// messages over 20 MB (a full batch of 10,000 sessions is about
	// 2.5 MB).
	MaxBatchBytes = 20 << 20
	// MaxSessions is the most sessions one batch may list.
	MaxSessions = 1 << 18
	// MaxNameBytes bounds names (a DNS subdomain is at most 253 bytes).
	MaxNameBytes = 253
	// maxTextBytes bounds the other strings.
	maxTextBytes = 1024
)

// magic leads every encoded batch, so that a replica tells a batch from
// the other messages of the group (a handover table starts with its
// format version, 1) and refuses a format it does not know.
var magic = []byte("FLR1")

// IsBatch reports whether msg claims to be an encoded batch.
func IsBatch(msg []byte) bool { return bytes.HasPrefix(msg, magic) }

// Encode returns b in its wire form.
func Encode(b *Batch) ([]byte, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode relay batch: %w", err)
	}
	return append(append(make([]byte, 0, len(magic)+len(body)), magic...), body...), nil
}

// Decode reads a batch a replica sent and checks it.
func Decode(msg []byte) (*Batch, error) {
	body, ok := bytes.CutPrefix(msg, magic)
	switch {
	case !ok:
		return nil, errors.New("not a relay batch")
	case len(msg) > MaxBatchBytes:
		return nil, fmt.Errorf("relay batch of %d bytes, at most %d", len(msg), MaxBatchBytes)
	}
	var b Batch
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("relay batch: %w", err)
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("relay batch from %q: %w", truncate(b.Replica), err)
	}
	return &b, nil
}

func (b *Batch) check() error {
	if err := name("replica", b.Replica); err != nil {
		return err
	}
	if err := name("hubID", b.HubID); err != nil {
		return err
	}
	if len(b.Sessions) > MaxSessions {
		return fmt.Errorf("%d sessions, at most %d", len(b.Sessions), MaxSessions)
	}
	live := make(map[string]bool, len(b.Sessions))
	for i := range b.Sessions {
		s := &b.Sessions[i]
		if err := s.check(); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		if s.Over() {
			continue // a cluster's sessions may end several times over
		}
		if live[s.Cluster] {
			return fmt.Errorf("session %d: a second live session of cluster %s", i, s.Cluster)
		}
		live[s.Cluster] = true
	}
	return nil
}

func (s *Session) check() error {
	if err := name("cluster", s.Cluster); err != nil {
		return err
	}
	if s.Session == "" || len(s.Session) > maxTextBytes {
		return fmt.Errorf("cluster %s: session id of %d bytes, want 1-%d", s.Cluster, len(s.Session), maxTextBytes)
	}
	for field, v := range map[string]string{"remote": s.Remote, "transport": s.Transport, "agentVersion": s.AgentVersion, "replaced": s.Replaced, "ended": s.Ended} {
		if len(v) > maxTextBytes {
			return fmt.Errorf("cluster %s: %s of %d bytes, at most %d", s.Cluster, field, len(v), maxTextBytes)
		}
	}
	if s.LeaseSeconds < 0 {
		return fmt.Errorf("cluster %s: negative lease (%d s)", s.Cluster, s.LeaseSeconds)
	}
	if s.Status != nil {
		if err := s.Status.Validate(); err != nil {
			return fmt.Errorf("cluster %s: status: %w", s.Cluster, err)
		}
	}
	return nil
}

func name(field, v string) error {
	if v == "" || len(v) > MaxNameBytes {
		return fmt.Errorf("%s of %d bytes, want 1-%d", field, len(v), MaxNameBytes)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > MaxNameBytes {
		return s[:MaxNameBytes]
	}
	return s
}
