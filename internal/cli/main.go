package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Program names: flotilla itself, and flotilla run by kubectl as the
// plugin kubectl-flotilla ("kubectl flotilla get clusters").
const (
	programName = "flotilla"
	pluginName  = "kubectl-flotilla"
)

// Main runs flotilla with argv, the process's arguments with the program
// first, and returns the process exit code: 0 on success, 1 when the
// command failed, 2 on a usage error. Errors are printed to stderr as
// "error: ...". Run as kubectl-flotilla (argv[0], as kubectl starts a
// plugin), its help and messages say "kubectl flotilla".
func Main(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	app := &App{Name: programName, Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Now: time.Now, Getenv: os.Getenv}
	var args []string
	if len(argv) > 0 {
		args = argv[1:]
		if filepath.Base(argv[0]) == pluginName {
			app.Name = "kubectl flotilla"
		}
	}
	return app.Run(ctx, args)
}

// App is one flotilla process's view of the world. Its fields are the
// dependencies a command has, so tests can fix the clock and environment.
type App struct {
	// Name is how the user runs flotilla, for help and messages:
	// "flotilla", or "kubectl flotilla" as a kubectl plugin. Empty means
	// "flotilla".
	Name string
	// Stdin is read by "apply -f -" and "delete -f -".
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the clock that ages are measured against.
	Now func() time.Time
	// Getenv reads KUBECONFIG.
	Getenv func(key string) string
	// WrapTransport, when set, wraps the HTTP transport of every request
	// to the hub (tests record requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Run runs the command line args (without the program name) and returns
// the exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	return a.report(a.dispatch(ctx, args))
}

// name is the program name for messages.
func (a *App) name() string {
	if a.Name == "" {
		return programName
	}
	return a.Name
}

// report prints err, if any, and maps it to an exit code.
func (a *App) report(err error) int {
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, errHelpShown):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(a.Stderr, "error: %s\n", usage.msg)
		fmt.Fprintf(a.Stderr, "See '%s --help' for usage.\n", usage.cmd)
		return 2
	default:
		fmt.Fprintf(a.Stderr, "error: %v\n", err)
		return 1
	}
}
