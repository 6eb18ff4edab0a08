package hub

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
		{"/metrics", http.StatusServiceUnavailable, "run on the leader, hub-0_1234"},
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
