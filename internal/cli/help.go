package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

const topHelp = `flotilla is the operator's client of a Flotilla hub: it applies resource
templates and the policies that propagate them to member clusters, shows where
they run (bindings and Works), shows the clusters, their leases and events,
taints or cordons clusters, and reschedules workloads from scratch.

It talks to the hub's Kubernetes API (the API server the hub embeds) with a
kubeconfig, as kubectl does: every command is an ordinary API request that
the hub authenticates, authorizes (ClusterRoles flotilla-viewer,
flotilla-operator, flotilla-admin) and audits. Installed on PATH as
kubectl-flotilla, it also runs as a kubectl plugin: kubectl flotilla get clusters.

Usage:
  flotilla [global flags] COMMAND [ARGS] [flags]
`

const topExamples = `Examples:
  # List the clusters with their readiness and taints, through the hub's
  # admin kubeconfig (else $KUBECONFIG, else ~/.kube/config)
  flotilla --kubeconfig /var/lib/flotilla/admin.kubeconfig get clusters

  # Propagate a workload, then see where it was scheduled and how it runs
  flotilla apply -f nginx.yaml -f nginx-policy.yaml
  flotilla get bindings -o wide
  flotilla describe binding nginx-deployment

  # Which agents are late renewing their lease?
  flotilla get leases

  # Everything the hub knows about one cluster
  flotilla describe cluster edge-1

  # Stop scheduling onto a cluster, then allow it again
  flotilla cordon edge-1
  flotilla uncordon edge-1

  # Spread a workload anew once the cluster is back
  flotilla rebalance deployment/nginx -n web

  # This client's version and the hub's
  flotilla version
`

const topFooter = `Environment:
  KUBECONFIG   kubeconfig files (separated by ':'), merged as kubectl merges
               them, when --kubeconfig is not given; else ~/.kube/config.
               The hub writes an admin kubeconfig to DATA/admin.kubeconfig.

Run 'flotilla COMMAND --help' for more about a command.
`

// writeTopHelp prints flotilla's own help with the list of commands; name
// is how the user runs it ("flotilla", or "kubectl flotilla").
func writeTopHelp(w io.Writer, name string, global *pflag.FlagSet) {
	fmt.Fprintf(w, "%s\nCommands:\n", asProgram(topHelp, name))
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.short)
	}
	fmt.Fprintf(tw, "  help\tShow the help of a command\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\nGlobal flags:\n", asProgram(topExamples, name))
	writeFlags(w, global)
	fmt.Fprintf(w, "\n%s", asProgram(topFooter, name))
}

// writeCommandHelp prints the help of one command.
func writeCommandHelp(w io.Writer, name string, cmd *command, local, global *pflag.FlagSet) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s %s\n", cmd.long, name, cmd.usage)
	if cmd.example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s", asProgram(cmd.example, name))
	}
	if local.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n")
		writeFlags(w, local)
	}
	fmt.Fprintf(w, "\nGlobal flags:\n")
	writeFlags(w, unshadowed(global, local))
}

// asProgram rewrites the command lines of a help text ("  flotilla get
// ...", "Run 'flotilla COMMAND --help'") for the name flotilla runs under,
// such as "kubectl flotilla".
func asProgram(text, name string) string {
	if name == programName {
		return text
	}
	text = strings.ReplaceAll(text, "\n  "+programName+" ", "\n  "+name+" ")
	text = strings.ReplaceAll(text, "'"+programName+" ", "'"+name+" ")
	if rest, ok := strings.CutPrefix(text, "  "+programName+" "); ok {
		text = "  " + name + " " + rest
	}
	return text
}

// unshadowed is global without the flags local redefines (rebalance's
// --timeout is how long it waits): those are the command's.
func unshadowed(global, local *pflag.FlagSet) *pflag.FlagSet {
	out := pflag.NewFlagSet(global.Name(), pflag.ContinueOnError)
	global.VisitAll(func(f *pflag.Flag) {
		if local.Lookup(f.Name) == nil {
			out.AddFlag(f)
		}
	})
	return out
}

// writeFlags lists flags like "  -o, --output FORMAT   usage (default x)".
// (pflag's own FlagUsages spells boolean flags as --flag[=true|false].)
func writeFlags(w io.Writer, fs *pflag.FlagSet) {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fs.VisitAll(func(f *pflag.Flag) {
		name := "    --" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			name += " " + varname
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	})
	_ = tw.Flush()
}
