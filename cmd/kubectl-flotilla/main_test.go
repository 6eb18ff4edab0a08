package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the tests run main itself as kubectl runs a plugin: with
// KUBECTL_FLOTILLA_TEST_MAIN set, the test binary is kubectl-flotilla (its
// argv[0]), its arguments taken from KUBECTL_FLOTILLA_TEST_ARGS.
func TestMain(m *testing.M) {
	if os.Getenv("KUBECTL_FLOTILLA_TEST_MAIN") == "1" {
		os.Args = append([]string{"/usr/local/bin/kubectl-flotilla"}, strings.Fields(os.Getenv("KUBECTL_FLOTILLA_TEST_ARGS"))...)
		main()
		return
	}
	os.Exit(m.Run())
}

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
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "KUBECTL_FLOTILLA_TEST_MAIN=1", "KUBECTL_FLOTILLA_TEST_ARGS="+tt.args)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stdout %q, stderr %q; want them to contain %q and %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
		})
	}
}
