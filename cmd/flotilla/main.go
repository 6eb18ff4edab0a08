// Command flotilla is the operator's client of a Flotilla hub: it applies
// and deletes resource templates and propagation policies, lists and
// describes clusters, leases, policies, bindings and Works, and taints and
// cordons clusters.
// All of it lives in internal/cli; this file only wires it to the process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-io/flotilla/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
