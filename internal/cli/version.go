package cli

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/internal/version"
)

func versionCommand() *command {
	return &command{
		name:  "version",
		usage: "version [--client]",
		short: "Print the version of flotilla and of the hub",
		long: `Print the version of this flotilla client and of the hub it reaches: the
hub's /version (through discovery, which any authenticated user may read)
says the Kubernetes release its API server embeds and the hub's own version,
as v1.37.2+flotilla.VERSION. With --client, only the client's, without
contacting the hub (as flotilla --version).`,
		example: `  flotilla version
  flotilla version --client
`,
		bind: bindVersion,
	}
}

type versionOptions struct {
	clientOnly bool
}

func bindVersion(fs *pflag.FlagSet) runFunc {
	o := &versionOptions{}
	fs.BoolVar(&o.clientOnly, "client", false, "print the client's version only")
	return o.run
}

func (o *versionOptions) run(ctx context.Context, inv *invocation, args []string) error {
	if len(args) > 0 {
		return inv.usagef("unexpected arguments %q", args)
	}
	fmt.Fprintf(inv.Stdout, "Client Version: %s\n", version.Get())
	if o.clientOnly {
		return nil
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	info, err := c.kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the hub's version: %w", err)
	}
	fmt.Fprintf(inv.Stdout, "Server Version: %s\n", info.GitVersion)
	return nil
}
