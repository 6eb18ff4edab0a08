package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Main runs flotilla with args (without the program name) and returns the
// process exit code: 0 on success, 1 when the command failed, 2 on a usage
// error. Errors are printed to stderr as "error: ...".
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &App{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Now: time.Now, Getenv: os.Getenv}
	return app.Run(ctx, args)
}

// App is one flotilla process's view of the world. Its fields are the
// dependencies a command has, so tests can fix the clock and environment.
type App struct {
	// Stdin is read by "apply -f -" and "delete -f -".
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the clock that ages are measured against.
	Now func() time.Time
	// Getenv reads FLOTILLA_SERVER and FLOTILLA_TOKEN.
	Getenv func(key string) string
	// HTTPClient sends the requests to the hub; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Run runs the command line args and returns the exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	return a.report(a.dispatch(ctx, args))
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
