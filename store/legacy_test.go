package store

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestCheckNoLegacyData(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(t.Context(), Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Client().Put(t.Context(), "/registry/flotilla.io/clusters/edge-1", "{}"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckNoLegacyData(t.Context()); err != nil {
		t.Fatalf("an etcd with only the API server's keys: %v", err)
	}
	if _, err := s.Client().Put(t.Context(), "/flotilla/clusters/edge-1", "{}"); err != nil {
		t.Fatal(err)
	}
	err = s.CheckNoLegacyData(t.Context())
	if err == nil || !strings.Contains(err.Error(), "1 objects of Flotilla's old store") || !strings.Contains(err.Error(), dir) {
		t.Errorf("an etcd with an old store's key: err = %v, want a refusal naming %s", err, dir)
	}
}
