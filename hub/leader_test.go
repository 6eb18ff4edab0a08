package hub

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/flotilla-io/flotilla/store"
)

// TestStandbyAndLeaderEndpoints: a standby is alive, not ready (naming the
// leader), and points the rest at the leader; once it leads, the leader's
// handler serves everything, and the standby's again after.
func TestStandbyAndLeaderEndpoints(t *testing.T) {
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var leader atomic.Pointer[string]
	h := &switchHandler{}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("before anything is set: /readyz %d, want 503", code)
	}

	h.setStandby(standbyHandler(&replica{store: s}, &leader))
	other := "hub-0_1234"
	leader.Store(&other)
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/livez", http.StatusOK, "ok"},
		{"/healthz", http.StatusOK, "ok"},
		{"/readyz?verbose", http.StatusServiceUnavailable, "[+]etcd ok\n[-]leader failed: standing by: the leader is hub-0_1234\nreadyz check failed\n"},
		{"/metrics", http.StatusServiceUnavailable, "are on the leader, hub-0_1234"},
		{"/", http.StatusServiceUnavailable, "this hub replica stands by"},
	}
	for _, tt := range tests {
		if code, body := get(tt.path); code != tt.wantCode || !strings.Contains(body, tt.wantBody) {
			t.Errorf("standby GET %s = %d %q, want %d with %q", tt.path, code, body, tt.wantCode, tt.wantBody)
		}
	}

	h.set(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "leading") }))
	if code, body := get("/readyz"); code != http.StatusOK || body != "leading" {
		t.Errorf("leading: /readyz %d %q, want the leader's handler", code, body)
	}
	h.set(nil)
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("after leading: /readyz %d, want the standby's 503", code)
	}
}

// recordingLock is a resourcelock.Interface that keeps the last record
// it was given.
type recordingLock struct {
	resourcelock.Interface
	updated []string
}

func (l *recordingLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.updated = append(l.updated, r.HolderIdentity)
	return nil
}

// TestReleaseGuard: renewals pass; a release (empty holder) is refused
// until the replica has stopped leading.
func TestReleaseGuard(t *testing.T) {
	lock := &recordingLock{}
	var allowed atomic.Bool
	g := &releaseGuard{Interface: lock, allowed: &allowed}
	if err := g.Update(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: "hub-a_1"}); err != nil {
		t.Errorf("renewal: %v", err)
	}
	if err := g.Update(t.Context(), resourcelock.LeaderElectionRecord{}); err == nil {
		t.Error("released while lead still runs")
	}
	allowed.Store(true)
	if err := g.Update(t.Context(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Errorf("release after lead: %v", err)
	}
	if diff := cmp.Diff([]string{"hub-a_1", ""}, lock.updated); diff != "" {
		t.Errorf("updates that reached the Lease (-want +got):\n%s", diff)
	}
}
