// Command flotilla is the operator's client of a Flotilla hub: it applies
// and deletes resource templates and propagation policies, lists and
// describes clusters, leases, policies, bindings and Works, taints and
// cordons clusters, rebalances workloads and purges eviction tasks, all
// through the hub's Kubernetes API with a kubeconfig (--kubeconfig,
// $KUBECONFIG, --context), as kubectl does.
// All of it lives in internal/cli; this file only wires it to the process
// (cmd/kubectl-flotilla is the same program as a kubectl plugin).
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
	code := cli.Main(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
