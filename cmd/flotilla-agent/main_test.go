package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/internal/pki"
)

func TestRun(t *testing.T) {
	certDir, kubeconfig := writeAgentFiles(t)
	good := []string{"--hub", "127.0.0.1:4443", "--cluster-name", "member-1", "--cert-dir", certDir, "--kubeconfig", kubeconfig}
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
			wantStdout: []string{"--hub", "--cluster-name", "--kubeconfig", "--cert-dir", "--lease-duration",
				"--status-interval", "--system-namespace", "flotilla-system", "--log-level", "ca.crt", "tls.crt", "tls.key", `"cluster:<cluster-name>"`},
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
			wantStderr: []string{"flotilla-agent: missing required flags: --hub, --cluster-name, --cert-dir"},
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
			wantStderr: []string{"flotilla-agent: read hub CA:", "ca.crt: no such file or directory"},
		},
		{
			name:       "bad system namespace",
			args:       slices.Concat(good, []string{"--system-namespace", "Flotilla"}),
			wantCode:   1,
			wantStderr: []string{`flotilla-agent: invalid agent configuration: system namespace "Flotilla" is not a DNS-1123 label`},
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
