package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/eviction"
	"github.com/flotilla-io/flotilla/hub"
	"github.com/flotilla-io/flotilla/hub/failover"
)

func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"negative grace", []string{"--data-dir", dir, "--cluster-monitor-grace-period=-1s"}, "--cluster-monitor-grace-period -1s"},
		{"zero flush", []string{"--data-dir", dir, "--lease-flush-interval=0s"}, "--lease-flush-interval 0s"},
		{"stray argument", []string{"--data-dir", dir, "serve"}, `unexpected arguments ["serve"]`},
		{"bad log level", []string{"--data-dir", dir, "--log-level", "loud"}, `--log-level "loud"`},
		{"negative cluster eviction rate", []string{"--data-dir", dir, "--cluster-eviction-rate=-1"}, "--cluster-eviction-rate -1: want zero (no evictions) or a positive number of clusters per second"},
		{"negative secondary cluster eviction rate", []string{"--data-dir", dir, "--secondary-cluster-eviction-rate=-0.5"}, "--secondary-cluster-eviction-rate -0.5: want zero (no evictions) or a positive number of clusters per second"},
		{"negative ceiling", []string{"--data-dir", dir, "--resource-eviction-rate=-1"}, "--resource-eviction-rate -1: want a positive number of bindings per second, or no flag for no ceiling"},
		{"ceiling 0 no longer halts", []string{"--data-dir", dir, "--resource-eviction-rate=0"}, "--resource-eviction-rate 0: no longer halts evictions"},
		{"old eviction rate 0 no longer halts", []string{"--data-dir", dir, "--eviction-rate=0"}, "--eviction-rate 0: no longer halts evictions"},
		{"old secondary rate", []string{"--data-dir", dir, "--secondary-eviction-rate=0.5"}, "--secondary-eviction-rate: no longer supported: it counted bindings per second"},
		{"bad approval mode", []string{"--data-dir", dir, "--agent-csr-approval", "sometimes"}, `--agent-csr-approval "sometimes": want auto or manual`},
		{"no store quota", []string{"--data-dir", dir, "--store-quota-bytes=0"}, "--store-quota-bytes 0: want a positive number of bytes"},
		{"threshold above the quota", []string{"--data-dir", dir, "--store-agent-write-threshold=1.5"}, "--store-agent-write-threshold 1.5: want a fraction of the quota in (0, 1]"},
		{"no store checks", []string{"--data-dir", dir, "--store-check-interval=0s"}, "--store-check-interval 0s: want a positive duration"},
		{"no controller workers", []string{"--data-dir", dir, "--controller-workers=0"}, "--controller-workers 0: want 1 to 256"},
		{"no handshakes", []string{"--data-dir", dir, "--max-handshakes=0"}, "--max-handshakes 0: want 1 to 100000"},
		{"no Retry threshold", []string{"--data-dir", dir, "--quic-retry-threshold=0"}, "--quic-retry-threshold 0: want 1 to 100000"},
		{"no handshakes per source", []string{"--data-dir", dir, "--max-handshakes-per-source=0"}, "--max-handshakes-per-source 0: want 1 to 100000"},
		{"long QUIC handshakes", []string{"--data-dir", dir, "--quic-handshake-timeout=2m"}, "--quic-handshake-timeout 2m0s: want 100ms to 1m"},
		{"no header timeout", []string{"--data-dir", dir, "--tcp-read-header-timeout=0s"}, "--tcp-read-header-timeout 0s: want a positive duration"},
		{"no idle timeout", []string{"--data-dir", dir, "--tcp-idle-timeout=0s"}, "--tcp-idle-timeout 0s: want a positive duration"},
		{"no WebSocket connections", []string{"--data-dir", dir, "--websocket-max-conns=0"}, "--websocket-max-conns 0: want 1 to 1000000"},
		{"no HTTP connections per source", []string{"--data-dir", dir, "--http-max-conns-per-source=-1"}, "--http-max-conns-per-source -1: want 1 to 1000000"},
		{"bad WebSocket address", []string{"--data-dir", dir, "--websocket-addr=7443"}, `--websocket-addr "7443": want HOST:PORT, :PORT or off`},
		{"short agent certificates", []string{"--data-dir", dir, "--agent-cert-ttl", "50s"}, "--agent-cert-ttl 50s: want at least 1m"},
		{"renew deadline past the lease", []string{"--data-dir", dir, "--leader-elect", "--leader-elect-renew-deadline=20s"}, "--leader-elect-lease-duration 15s: want more than --leader-elect-renew-deadline (20s)"},
		{"retry period near the renew deadline", []string{"--data-dir", dir, "--leader-elect", "--leader-elect-retry-period=9s"}, "--leader-elect-renew-deadline 10s: want more than 1.2 × --leader-elect-retry-period (9s)"},
		{"no retry period", []string{"--data-dir", dir, "--etcd-endpoints=http://127.0.0.1:1", "--leader-elect-retry-period=0s"}, "--leader-elect-retry-period 0s: want a positive duration"},
		{"gossip without leader election", []string{"--data-dir", dir, "--gossip-join=hub-1:7946"}, "--gossip-join needs leader election"},
		{"gossip join without a port", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1"}, `--gossip-join "hub-1": want HOST:PORT`},
		{"gossip address without a port", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1:7946", "--gossip-addr=7946"}, `--gossip-addr "7946": want HOST:PORT`},
		{"no gossip interval", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1:7946", "--gossip-interval=0s"}, "--gossip-interval 0s: want 100ms to --leader-elect-lease-duration (15s)"},
		{"gossip interval past the election lease", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1:7946", "--gossip-interval=20s"}, "--gossip-interval 20s: want 100ms to --leader-elect-lease-duration (15s)"},
		{"gossip advertised by name", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1:7946", "--gossip-advertise-addr=hub-0:7946"}, `--gossip-advertise-addr "hub-0:7946": want an IP address and a port`},
		{"long hub id with gossip", []string{"--data-dir", dir, "--leader-elect", "--gossip-join=hub-1:7946", "--hub-id=" + strings.Repeat("h", 201)}, "at most 200 characters with gossip"},
		{"profiling without an address", []string{"--data-dir", dir, "--enable-profiling", "--profiling-addr="}, "--enable-profiling needs a --profiling-addr"},
		{"unknown certs command", []string{"certs", "revoke"}, "only certs command is `certs issue`"},
		{"certs issue without cluster", []string{"certs", "issue", "--data-dir", dir, "--out", dir}, "--cluster and --out are required"},
		{"certs issue bad name", []string{"certs", "issue", "--data-dir", dir, "--cluster", "Bad_Name", "--out", filepath.Join(dir, "out")}, `--cluster "Bad_Name"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
		t.Errorf("a refused certs issue wrote %s (stat: %v)", filepath.Join(dir, "out"), err)
	}
}

// TestConnLimitDefaults: by default nothing unauthenticated holds a
// place for long. A QUIC handshake ends within twice its idle timeout; on
// TCP a connection that sends nothing ends after the header timeout, one
// that finishes its TLS handshake and then sends nothing after two, one
// idle after a request after the idle timeout: each within 60 s. Retry
// starts well before the handshake places run out, and the HTTP server
// gets the same timeouts as the WebSocket fallback.
func TestConnLimitDefaults(t *testing.T) {
	var cfg hub.Config
	var o serveOptions
	if err := newFlags(&cfg, &o, "hub").Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := setConnLimits(&cfg); err != nil {
		t.Fatal(err)
	}
	const idleBound = 60 * time.Second
	ws, web := cfg.WebSocketLimits, cfg.HTTPLimits
	for what, d := range map[string]time.Duration{
		"a QUIC handshake that stalls":            2 * cfg.QUICHandshakeTimeout,
		"a TCP connection that sends nothing":     ws.ReadHeaderTimeout,
		"a TLS connection that sends no request":  2 * ws.ReadHeaderTimeout,
		"a connection idle after a request":       ws.IdleTimeout,
		"an HTTP connection that sends nothing":   web.ReadHeaderTimeout,
		"an HTTP connection idle after a request": web.IdleTimeout,
	} {
		if d <= 0 || d > idleBound {
			t.Errorf("%s is held for %v by default, want at most %v", what, d, idleBound)
		}
	}
	if web.ReadHeaderTimeout != ws.ReadHeaderTimeout || web.IdleTimeout != ws.IdleTimeout {
		t.Errorf("HTTP timeouts %v/%v, want the WebSocket fallback's %v/%v", web.ReadHeaderTimeout, web.IdleTimeout, ws.ReadHeaderTimeout, ws.IdleTimeout)
	}
	h := cfg.Handshakes
	if h.RetryThreshold >= h.Max || h.PerSource >= h.Max {
		t.Errorf("handshake limits %+v: want Retry and the per-source cap to start below --max-handshakes", h)
	}
	if ws.MaxConnsPerSource >= ws.MaxConns || web.MaxConnsPerSource >= web.MaxConns {
		t.Errorf("per-source caps %d, %d not below the totals %d, %d", ws.MaxConnsPerSource, web.MaxConnsPerSource, ws.MaxConns, web.MaxConns)
	}
}

// TestZeroEvictionRatesHalt: 0 is a rate (no evictions), as in
// Kubernetes, not "the default"; --help says so.
func TestZeroEvictionRatesHalt(t *testing.T) {
	tests := []struct {
		name            string
		rate, secondary float64
	}{
		{"cluster eviction rate 0", 0, 0.01},
		{"secondary cluster eviction rate 0", 0.1, 0},
		{"both 0", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fo := failover.DefaultConfig()
			fo.Zones.ClusterRate, fo.Zones.SecondaryClusterRate = tt.rate, tt.secondary
			var cfg hub.Config
			if err := setFailover(&cfg, fo, 300, 300); err != nil {
				t.Fatal(err)
			}
			want := eviction.ZoneConfig{ClusterRate: tt.rate, SecondaryClusterRate: tt.secondary, LargeZoneThreshold: eviction.DefaultLargeZoneThreshold, UnhealthyThreshold: eviction.DefaultUnhealthyThreshold}
			if diff := cmp.Diff(want, cfg.Failover.Zones); diff != "" {
				t.Errorf("zones (-want +got):\n%s", diff)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"0 halts evictions, except in zones partially disrupted", "0 halts evictions there too)", "unset: no ceiling"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help does not say %q:\n%s", want, stderr.String())
		}
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); !strings.HasPrefix(got, "flotilla ") || !strings.Contains(got, "kubernetes v1.37.2") {
		t.Errorf("--version printed %q", got)
	}
}

// Without a running hub, certs issue cannot register the cluster (sessions
// need a registered cluster): it says so and writes nothing. The e2e tests
// issue against a real hub.
func TestCertsIssueNeedsTheHub(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "edge-1")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"certs", "issue", "--data-dir", dir, "--cluster", "edge-1", "--out", out, "--timeout", "300ms"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "certs issue needs flotilla-hub running with --data-dir "+dir) {
		t.Fatalf("certs issue without a hub: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused certs issue wrote %s (stat: %v)", out, err)
	}
}

// TestKarmadaEvictionRateFlag: --resource-eviction-rate, as
// karmada-controller-manager spells it, and --eviction-rate, its former
// (deprecated) name, set the ceiling on bindings per second and leave the
// clusters' rates alone; giving both is refused before anything starts.
func TestKarmadaEvictionRateFlag(t *testing.T) {
	for _, name := range []string{"resource-eviction-rate", "eviction-rate"} {
		var cfg hub.Config
		var o serveOptions
		flags := newFlags(&cfg, &o, "host")
		flags.SetOutput(io.Discard) // the deprecation warning
		if err := flags.Parse([]string{"--" + name + "=2.5"}); err != nil {
			t.Fatal(err)
		}
		want := eviction.DefaultZoneConfig()
		want.BindingRate = 2.5
		if diff := cmp.Diff(want, o.failover.Zones); diff != "" {
			t.Errorf("--%s=2.5: zones (-want +got):\n%s", name, diff)
		}
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"--eviction-rate=1", "--resource-eviction-rate=2"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("both rate flags: %v, want an error saying to give one", err)
	}
}
