package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyz(t *testing.T) {
	probes := []probe{
		{name: "etcd", check: func(context.Context) error { return nil }},
		{name: "quic-listener", check: func(context.Context) error { return errors.New("not accepting agent connections") }},
	}
	passing := probes[:1]
	tests := []struct {
		name     string
		probes   []probe
		query    string
		wantCode int
		wantBody string
	}{
		{"all pass", passing, "", http.StatusOK, "ok"},
		{"all pass, verbose", passing, "?verbose", http.StatusOK, "[+]etcd ok\nreadyz check passed\n"},
		{"one fails", probes, "", http.StatusServiceUnavailable, "[+]etcd ok\n[-]quic-listener failed: not accepting agent connections\nreadyz check failed\n"},
		{"failed one excluded", probes, "?exclude=quic-listener&verbose", http.StatusOK, "[+]etcd ok\n[+]quic-listener excluded: ok\nreadyz check passed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			readyz(tt.probes).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz"+tt.query, nil))
			if rec.Code != tt.wantCode || rec.Body.String() != tt.wantBody {
				t.Errorf("GET /readyz%s = %d %q, want %d %q", tt.query, rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestReadyzGivesUpOnAStuckCheck(t *testing.T) {
	stuck := []probe{{name: "etcd", check: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the request is gone: the check's context ends with it
	rec := httptest.NewRecorder()
	readyz(stuck).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a check that never returns on its own: %d %q, want 503", rec.Code, rec.Body.String())
	}
}
