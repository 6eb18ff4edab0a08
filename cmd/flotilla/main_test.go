package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the tests run main itself: with FLOTILLA_TEST_MAIN set,
// the test binary is flotilla, its arguments taken from FLOTILLA_TEST_ARGS.
func TestMain(m *testing.M) {
	if os.Getenv("FLOTILLA_TEST_MAIN") == "1" {
		os.Args = append([]string{"flotilla"}, strings.Fields(os.Getenv("FLOTILLA_TEST_ARGS"))...)
		main()
		return
	}
	os.Exit(m.Run())
}

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
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "FLOTILLA_TEST_MAIN=1", "FLOTILLA_TEST_ARGS="+tt.args)
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
