package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/internal/version"
)

// defaultTimeout is the default of the global --timeout.
const defaultTimeout = 10 * time.Second

// runFunc runs a command with its positional arguments, after its flags
// were parsed.
type runFunc func(ctx context.Context, inv *invocation, args []string) error

// command is one flotilla subcommand and its help.
type command struct {
	name    string
	usage   string // synopsis after "flotilla "
	short   string // one line for the list of commands
	long    string // the text that opens the command's --help
	example string
	// bind adds the command's own flags to fs and returns the command's
	// run function, bound to those flags.
	bind func(fs *pflag.FlagSet) runFunc
}

// commands lists the supported commands in the order help shows them.
func commands() []*command {
	return []*command{
		getCommand(), describeCommand(), applyCommand(), deleteCommand(), planCommand(),
		taintCommand(), cordonCommand(), uncordonCommand(), rebalanceCommand(), purgeCommand(),
		tokenCommand(), versionCommand(),
	}
}

func findCommand(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// invocation is one run of a command: the app, the global options, the
// command's name for usage errors, and the clients of the hub once made.
type invocation struct {
	*App
	cmd string // "flotilla get"
	// kubeconfigFlag and kubeContext are --kubeconfig and --context;
	// timeout is the time limit of each request.
	kubeconfigFlag string
	kubeContext    string
	timeout        time.Duration

	loaded *kubeconfig // on first use
	hub    *hubClients // on first use
}

func (inv *invocation) usagef(format string, args ...any) error {
	return usagef(inv.cmd, format, args...)
}

// newInvocation starts a run of a with the global options' defaults.
func (a *App) newInvocation() *invocation {
	return &invocation{App: a, cmd: a.name(), timeout: defaultTimeout}
}

// dispatch parses the global flags, finds the command and runs it.
func (a *App) dispatch(ctx context.Context, args []string) error {
	inv := a.newInvocation()
	var help, showVersion bool
	top := inv.topFlags(&help, &showVersion)
	top.SetInterspersed(false) // flags after the command are the command's
	if err := parseFlags(top, args); err != nil {
		return inv.usagef("%v", err)
	}
	rest := top.Args()
	switch {
	case help:
		writeTopHelp(a.Stdout, a.name(), top)
		return errHelpShown
	case showVersion:
		fmt.Fprintln(a.Stdout, version.Get().String())
		return nil
	case len(rest) == 0:
		return inv.usagef("no command given; supported commands: %s", commandNames())
	case rest[0] == "help":
		return inv.help(ctx, rest[1:])
	}
	cmd := findCommand(rest[0])
	if cmd == nil {
		return inv.usagef("unknown command %q; supported commands: %s", rest[0], commandNames())
	}
	return inv.runCommand(ctx, cmd, rest[1:])
}

// help serves "flotilla help [COMMAND]".
func (inv *invocation) help(ctx context.Context, args []string) error {
	if len(args) == 0 {
		var help, showVersion bool
		writeTopHelp(inv.Stdout, inv.name(), inv.topFlags(&help, &showVersion))
		return errHelpShown
	}
	cmd := findCommand(args[0])
	if cmd == nil {
		return inv.usagef("unknown command %q; supported commands: %s", args[0], commandNames())
	}
	return inv.runCommand(ctx, cmd, []string{"--help"})
}

// runCommand parses cmd's flags together with the global ones (so global
// flags may follow the command, as with kubectl) and runs it.
func (inv *invocation) runCommand(ctx context.Context, cmd *command, args []string) error {
	inv.cmd = inv.name() + " " + cmd.name
	local := pflag.NewFlagSet(cmd.name, pflag.ContinueOnError)
	run := cmd.bind(local)
	var help bool
	global := inv.globalFlags(&help)
	all := pflag.NewFlagSet(cmd.name, pflag.ContinueOnError)
	all.AddFlagSet(local)
	all.AddFlagSet(global)
	if err := parseFlags(all, args); err != nil {
		return inv.usagef("%v", err)
	}
	if help {
		writeCommandHelp(inv.Stdout, inv.name(), cmd, local, global)
		return errHelpShown
	}
	if err := inv.checkGlobals(); err != nil {
		return err
	}
	return inv.explain(run(ctx, inv, all.Args()))
}

// topFlags are the global flags and --version, which only flotilla itself
// takes (flotilla --version).
func (inv *invocation) topFlags(help, showVersion *bool) *pflag.FlagSet {
	fs := inv.globalFlags(help)
	fs.BoolVar(showVersion, "version", false, "print flotilla's version and exit")
	return fs
}

// globalFlags binds the flags every command accepts: kubectl's
// --kubeconfig and --context, and the time limit of each request.
func (inv *invocation) globalFlags(help *bool) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flotilla", pflag.ContinueOnError)
	fs.StringVar(&inv.kubeconfigFlag, "kubeconfig", inv.kubeconfigFlag,
		"`FILE` of the kubeconfig to reach the hub with (default $KUBECONFIG, else ~/.kube/config); the hub writes DATA/admin.kubeconfig")
	fs.StringVar(&inv.kubeContext, "context", inv.kubeContext, "the kubeconfig `CONTEXT` to use (default its current context)")
	fs.DurationVar(&inv.timeout, "timeout", inv.timeout, "time limit of each request to the hub, as a `DURATION` such as 30s (0 means none)")
	fs.BoolVarP(help, "help", "h", false, "show help and exit")
	return fs
}

// checkGlobals rejects a --timeout no request could use.
func (inv *invocation) checkGlobals() error {
	if inv.timeout < 0 {
		return inv.usagef("invalid --timeout %s: must not be negative", inv.timeout)
	}
	return nil
}

// parseFlags parses args into fs, leaving the printing of errors to the
// caller.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs.Parse(args)
}
