package main

import (
	"testing"

	"github.com/flotilla-io/flotilla/test/selfexec"
)

// TestMain lets the tests run main itself as kubectl runs a plugin: as
// kubectl-flotilla (its argv[0]), in a child process.
func TestMain(m *testing.M) { selfexec.Main(m, "/usr/local/bin/kubectl-flotilla", main) }

func TestPluginArgv(t *testing.T) {
	tests := []struct {
		args       string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"--help", 0, "Usage:\n  kubectl flotilla [global flags] COMMAND", ""},
		{"get --help", 0, "Usage:\n  kubectl flotilla get RESOURCE", ""},
		{"get", 2, "", "error: missing the resource type; supported: clusters"},
		{"get", 2, "", "See 'kubectl flotilla get --help' for usage."},
		{"frobnicate", 2, "", "See 'kubectl flotilla --help' for usage."},
		{"version --client", 0, "Client Version: flotilla ", ""},
		{"get clusters --kubeconfig testdata/unreachable.kubeconfig --timeout 5s", 1, "", "error: cannot reach the hub at https://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			selfexec.Expect(t, tt.args, tt.wantCode, tt.wantStdout, tt.wantStderr)
		})
	}
}
