// Package selfexec lets a command's tests run its main in a child process
// (the test binary itself), to check exit codes and output as a user sees
// them: TestMain calls Main, and each case calls Expect.
package selfexec

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// argsEnv carries the child's arguments; its presence makes the test
// binary run main instead of the tests.
const argsEnv = "FLOTILLA_SELFEXEC_ARGS"

// Main is a TestMain: in a child started by Expect it runs main as argv0
// with the child's arguments; otherwise it runs the tests.
func Main(m *testing.M, argv0 string, main func()) {
	if args, ok := os.LookupEnv(argsEnv); ok {
		os.Args = append([]string{argv0}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Expect runs main with args (split on spaces) in a child process and
// checks its exit code and that stdout and stderr contain wantStdout and
// wantStderr.
func Expect(t *testing.T, args string, wantCode int, wantStdout, wantStderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), argsEnv+"="+args)
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
	if code != wantCode {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, wantCode, stderr.String())
	}
	if !strings.Contains(stdout.String(), wantStdout) || !strings.Contains(stderr.String(), wantStderr) {
		t.Errorf("stdout %q, stderr %q; want them to contain %q and %q", stdout.String(), stderr.String(), wantStdout, wantStderr)
	}
}
