// Command kubectl-flotilla is flotilla as a kubectl plugin: with it on
// PATH, "kubectl flotilla get clusters" runs it with the arguments after
// "flotilla" (kubectl passes its own environment, so $KUBECONFIG reaches it
// too). It is the same program as cmd/flotilla; its help and messages say
// "kubectl flotilla".
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
