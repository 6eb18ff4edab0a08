package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/pki"
)

func TestRun(t *testing.T) {
	certDir, kubeconfig := writeAgentFiles(t)
	// Held for the test, so that the default --http-addr is taken (if
	// something else holds it, it is taken too).
	if ln, err := net.Listen("tcp", ":8080"); err == nil {
		t.Cleanup(func() { ln.Close() })
	}
	good := []string{"--hub", "127.0.0.1:4443", "--cluster-name", "member-1", "--cert-dir", certDir, "--kubeconfig", kubeconfig,
		"--http-addr", "127.0.0.1:0"}
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{
			name:     "help",
			args:     []string{"--help"},
			wantCode: 0,
			wantStdout: []string{"--hub", "--cluster-name", "--kubeconfig", "--cert-dir", "--lease-duration", "--enable-profiling", "--profiling-addr",
				"--status-interval", "--system-namespace", "flotilla-system", "--log-level", "ca.crt", "tls.crt", "tls.key", `"cluster:<cluster-name>"`,
				"--bootstrap-token", "--bootstrap-token-file", "--hub-ca-hash", "--cluster-provider", "--cluster-region", "--cluster-zone",
				"--cluster-labels", "Joining:", "flotilla token create", "kubectl certificate approve",
				"--cert-secret", "--leader-elect", "--leader-elect-lease-name", "--leader-elect-lease-duration", "15s",
				"--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "2s", "--http-addr", `":8080"`,
				"Leader election (--leader-elect):", "/healthz", "/readyz", "/metrics", "tls.key.next", "POD_NAME"},
		},
		{
			name:       "version",
			args:       []string{"--version"},
			wantCode:   0,
			wantStdout: []string{"flotilla ", "kubernetes v1.37.2"},
		},
		{
			name:       "missing flags",
			args:       nil,
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: missing required flags: --hub, --cluster-name, --cert-dir or --cert-secret"},
		},
		{
			name:       "unknown flag",
			args:       []string{"--hubb", "x"},
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: unknown flag: --hubb"},
		},
		{
			name:       "bad log level",
			args:       slices.Concat(good, []string{"--log-level", "loud"}),
			wantCode:   1,
			wantStderr: []string{`flotilla-agent: --log-level "loud"`},
		},
		{
			name:       "stray argument",
			args:       slices.Concat(good, []string{"extra"}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: unexpected arguments: extra"},
		},
		{
			name:       "bad cluster name",
			args:       slices.Concat(good, []string{"--cluster-name", "Member_1"}),
			wantCode:   1,
			wantStderr: []string{`flotilla-agent: invalid agent configuration: cluster name "Member_1"`},
		},
		{
			name:       "missing certificates",
			args:       slices.Concat(good, []string{"--cert-dir", t.TempDir()}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: read hub CA:", "ca.crt: no such file or directory", "or give --bootstrap-token and --hub-ca-hash to join"},
		},
		{
			name:       "both certificate stores",
			args:       slices.Concat(good, []string{"--cert-secret", "flotilla-agent-credentials"}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: --cert-dir and --cert-secret: give one, not both"},
		},
		{
			name:       "bad leader election timings",
			args:       slices.Concat(good, []string{"--leader-elect", "--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "6s"}),
			wantCode:   1,
			wantStderr: []string{"leader election lease duration 5s must be longer than the renew deadline 6s"},
		},
		{
			name:       "HTTP address in use",
			args:       slices.Concat(good, []string{"--http-addr", "256.0.0.1:1"}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: HTTP endpoints: listen tcp"},
		},
		{
			name:       "profiling without an address",
			args:       slices.Concat(good, []string{"--enable-profiling", "--profiling-addr="}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: --enable-profiling needs a --profiling-addr"},
		},
		{
			name:       "profiling address unusable",
			args:       slices.Concat(good, []string{"--enable-profiling", "--profiling-addr", "256.0.0.1:1"}),
			wantCode:   1,
			wantStderr: []string{"flotilla-agent: listen for profiling on 256.0.0.1:1"},
		},
		{
			name:     "profiling on a free port",
			args:     slices.Concat(good, []string{"--enable-profiling", "--profiling-addr", "127.0.0.1:0"}),
			wantCode: 0,
		},
		{
			name:       "bad system namespace",
			args:       slices.Concat(good, []string{"--system-namespace", "Flotilla"}),
			wantCode:   1,
			wantStderr: []string{`flotilla-agent: invalid agent configuration: system namespace "Flotilla" is not a DNS-1123 label`},
		},
		{
			name:       "default HTTP address taken",
			args:       slices.DeleteFunc(slices.Clone(good), func(a string) bool { return a == "--http-addr" || a == "127.0.0.1:0" }),
			wantCode:   0,
			wantStderr: []string{"no HTTP endpoints: cannot listen on the default address (give --http-addr)"},
		},
		{
			name:     "stops when the context ends",
			args:     slices.Concat(good, []string{"--lease-duration", "20s", "--status-interval", "2s", "--log-level", "debug"}),
			wantCode: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The agent stops at once: its context has already ended.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			checkContains(t, "stdout", stdout.String(), tc.wantStdout)
			checkContains(t, "stderr", stderr.String(), tc.wantStderr)
		})
	}
}

func checkContains(t *testing.T, name, got string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", name, w, got)
		}
	}
}

// writeAgentFiles writes a certificate folder for cluster member-1 and a
// kubeconfig that nothing dials.
func writeAgentFiles(t *testing.T) (certDir, kubeconfig string) {
	t.Helper()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(pki.Request{CommonName: "cluster:member-1", Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	certDir = t.TempDir()
	write(t, filepath.Join(certDir, "ca.crt"), ca.CertPEM())
	write(t, filepath.Join(certDir, "tls.crt"), kp.CertPEM)
	write(t, filepath.Join(certDir, "tls.key"), kp.KeyPEM)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	write(t, kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: m, context: {cluster: m, user: u}}]
current-context: m
`))
	return certDir, kubeconfig
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

const (
	testToken = "abcdef.s3cr3ts3cr3ts3cr"
	testPin   = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestJoinFlags: bad join flags are usage errors that name the flag, never
// print the token, and write nothing.
func TestJoinFlags(t *testing.T) {
	_, kubeconfig := writeAgentFiles(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	write(t, tokenFile, []byte(testToken+"\n"))
	emptyFile := filepath.Join(t.TempDir(), "empty")
	write(t, emptyFile, []byte(" \n"))
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{"bad CA hash", []string{"--bootstrap-token", testToken, "--hub-ca-hash", "sha256:abc"}, 1,
			[]string{`flotilla-agent: --hub-ca-hash: CA pin "sha256:abc": want sha256:<64 hex digits>`}},
		{"CA hash without sha256:", []string{"--bootstrap-token", testToken, "--hub-ca-hash", testPin[7:]}, 1,
			[]string{"flotilla-agent: --hub-ca-hash: CA pin", "want sha256:<64 hex digits>"}},
		{"both token flags", []string{"--bootstrap-token", testToken, "--bootstrap-token-file", tokenFile, "--hub-ca-hash", testPin}, 1,
			[]string{"flotilla-agent: --bootstrap-token and --bootstrap-token-file: give one, not both"}},
		{"token without CA hash", []string{"--bootstrap-token", testToken}, 1,
			[]string{"flotilla-agent: --bootstrap-token needs --hub-ca-hash"}},
		{"malformed token", []string{"--bootstrap-token", "abcdef-s3cr3ts3cr3ts3cr", "--hub-ca-hash", testPin}, 1,
			[]string{"flotilla-agent: --bootstrap-token: not a bootstrap token (23 characters): want [a-z0-9]{6}.[a-z0-9]{16}"}},
		{"missing token file", []string{"--bootstrap-token-file", "/nonexistent/token", "--hub-ca-hash", testPin}, 1,
			[]string{"flotilla-agent: --bootstrap-token-file: open /nonexistent/token: no such file or directory"}},
		// Emptied after a join: no token, and this agent has no certificate.
		{"empty token file, no certificate", []string{"--bootstrap-token-file", emptyFile, "--hub-ca-hash", testPin}, 1,
			[]string{"or give --bootstrap-token and --hub-ca-hash to join"}},
		{"bad token Secret", []string{"--bootstrap-token-file", tokenFile, "--hub-ca-hash", testPin, "--bootstrap-token-secret", "Bad_Name"}, 1,
			[]string{`bootstrap token Secret name "Bad_Name" is not a DNS-1123 subdomain`}},
		{"bad labels", []string{"--cluster-labels", "site=store 7"}, 1,
			[]string{`flotilla-agent: --cluster-labels: value "store 7" of site is not a label value`}},
		{"label without value", []string{"--cluster-labels", "site"}, 1,
			[]string{`flotilla-agent: --cluster-labels: "site": want key=value`}},
		{"bad label key", []string{"--cluster-labels", "-site=x"}, 1,
			[]string{`flotilla-agent: --cluster-labels: key "-site" is not a label key`}},
		{"bad zone", []string{"--cluster-zone", "eu west 1a"}, 1,
			[]string{`flotilla-agent: --cluster-zone: "eu west 1a" is not a label value`}},
		{"bad provider", []string{"--cluster-provider", strings.Repeat("p", 64)}, 1,
			[]string{"flotilla-agent: --cluster-provider:", "must be no more than 63"}},
		// With good flags the agent would join; its context has ended, so it
		// stops before writing anything.
		{"good join flags", []string{"--bootstrap-token-file", tokenFile, "--hub-ca-hash", testPin,
			"--cluster-provider", "aws", "--cluster-region", "eu-west-1", "--cluster-zone", "eu-west-1a",
			"--cluster-labels", "site=store-7,example.com/tier=edge"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certDir := filepath.Join(t.TempDir(), "certs")
			args := slices.Concat([]string{"--hub", "127.0.0.1:4443", "--cluster-name", "member-1",
				"--cert-dir", certDir, "--kubeconfig", kubeconfig}, tc.args)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			checkContains(t, "stderr", stderr.String(), tc.wantStderr)
			if strings.Contains(stderr.String(), "s3cr3ts3cr3ts3cr") {
				t.Errorf("stderr shows the token's secret:\n%s", stderr.String())
			}
			if _, err := os.Stat(certDir); !os.IsNotExist(err) {
				t.Errorf("the certificate directory was made (%v), want nothing written", err)
			}
		})
	}
}

func TestParseJoinFlags(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	write(t, tokenFile, []byte(testToken+" \r\n\n"))
	// The token loses its trailing whitespace, the hash its upper case.
	cfg, _, err := parseFlags([]string{"--hub", "hub:4443", "--cluster-name", "member-1", "--cert-dir", "certs",
		"--bootstrap-token-file", tokenFile, "--hub-ca-hash", "sha256:" + strings.ToUpper(testPin[7:]),
		"--cluster-provider", "aws", "--cluster-region", "eu-west-1", "--cluster-zone", "eu-west-1a",
		"--cluster-labels", "site=store-7,example.com/tier=edge,empty="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type join struct {
		Token, Hash, Provider, Region, Zone string
		Labels                              map[string]string
	}
	got := join{cfg.BootstrapToken, cfg.HubCAHash, cfg.Provider, cfg.Region, cfg.Zone, cfg.Labels}
	want := join{testToken, testPin, "aws", "eu-west-1", "eu-west-1a", map[string]string{"site": "store-7", "example.com/tier": "edge", "empty": ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("join settings (-want +got):\n%s", diff)
	}
}
