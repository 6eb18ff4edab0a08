package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probe is one named check of /readyz: nil when it passes.
type probe struct {
	name  string
	check func(ctx context.Context) error
}

// probeTimeout bounds each readiness check, so a stuck store makes /readyz
// fail rather than hang the kubelet's probe.
const probeTimeout = 3 * time.Second

// livez answers while the process serves HTTP: restarting the hub would
// not cure anything else.
func livez(w http.ResponseWriter, r *http.Request) {
	writeChecks(w, r, "livez", []checkResult{{name: "ping"}})
}

// readyz runs every check, as kube-apiserver's /readyz does: 200 "ok"
// when all pass, 503 with the failed ones otherwise; ?verbose lists each
// check, ?exclude=NAME skips one.
func readyz(probes []probe) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		excluded := r.URL.Query()["exclude"]
		results := make([]checkResult, 0, len(probes))
		for _, p := range probes {
			if contains(excluded, p.name) {
				results = append(results, checkResult{name: p.name, excluded: true})
				continue
			}
			ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
			err := p.check(ctx)
			cancel()
			results = append(results, checkResult{name: p.name, err: err})
		}
		writeChecks(w, r, "readyz", results)
	}
}

type checkResult struct {
	name     string
	err      error
	excluded bool
}

func writeChecks(w http.ResponseWriter, r *http.Request, what string, results []checkResult) {
	var b strings.Builder
	failed := false
	for _, c := range results {
		switch {
		case c.excluded:
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.name)
		case c.err != nil:
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, c.err)
		default:
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, verbose := r.URL.Query()["verbose"]
	switch {
	case failed:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, b.String()+what+" check failed\n")
	case verbose:
		_, _ = io.WriteString(w, b.String()+what+" check passed\n")
	default:
		_, _ = io.WriteString(w, "ok")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
