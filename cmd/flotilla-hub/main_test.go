package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); !strings.HasPrefix(got, "flotilla ") || !strings.Contains(got, "kubernetes v1.37.2") {
		t.Errorf("--version printed %q", got)
	}
}

func TestCertsIssueWritesAgentFiles(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "edge-1")
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"certs", "issue", "--data-dir", dir, "--cluster", "edge-1", "--out", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca.crt", "tls.crt", "tls.key"} {
		info, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v: readable by others", name, info.Mode().Perm())
		}
	}
	if !strings.Contains(stdout.String(), "edge-1") {
		t.Errorf("stdout = %q", stdout.String())
	}
}
