package main

import (
	"testing"

	"github.com/flotilla-io/flotilla/test/selfexec"
)

// TestMain lets the tests run main itself, as flotilla, in a child process.
func TestMain(m *testing.M) { selfexec.Main(m, "flotilla", main) }

func TestExitCodes(t *testing.T) {
	tests := []struct {
		args       string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"--help", 0, "Usage:", ""},
		{"frobnicate", 2, "", "error: unknown command \"frobnicate\""},
		{"apply -n shop", 2, "", "error: missing -f"},
		{"get clusters --kubeconfig testdata/unreachable.kubeconfig --timeout 5s", 1, "", "error: cannot reach the hub at https://127.0.0.1:1"},
		{"--version", 0, "flotilla ", ""},
		{"get", 2, "", "See 'flotilla get --help' for usage."},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			selfexec.Expect(t, tt.args, tt.wantCode, tt.wantStdout, tt.wantStderr)
		})
	}
}
