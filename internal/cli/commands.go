package cli

import (
	"context"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Defaults of the global flags.
const (
	defaultServer  = "http://127.0.0.1:7080"
	defaultTimeout = 10 * time.Second
)

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

// invocation is one run of a command: the app, the global options and the
// command's name for usage errors.
type invocation struct {
	*App
	cmd     string // "flotilla get"
	server  string
	timeout time.Duration
}

func (inv *invocation) usagef(format string, args ...any) error {
	return usagef(inv.cmd, format, args...)
}

// dispatch parses the global flags, finds the command and runs it.
func (a *App) dispatch(ctx context.Context, args []string) error {
	inv := &invocation{App: a, cmd: "flotilla", server: defaultServer, timeout: defaultTimeout}
	if s := a.Getenv("FLOTILLA_SERVER"); s != "" {
		inv.server = s
	}
	var help bool
	top := inv.globalFlags(&help)
	top.SetInterspersed(false) // flags after the command are the command's
	if err := parseFlags(top, args); err != nil {
		return inv.usagef("%v", err)
	}
	rest := top.Args()
	switch {
	case help:
		writeTopHelp(a.Stdout, top)
		return errHelpShown
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
		var help bool
		writeTopHelp(inv.Stdout, inv.globalFlags(&help))
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
	inv.cmd = "flotilla " + cmd.name
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
		writeCommandHelp(inv.Stdout, cmd, local, global)
		return errHelpShown
	}
	if err := inv.checkGlobals(); err != nil {
		return err
	}
	return run(ctx, inv, all.Args())
}

// globalFlags binds the flags every command accepts.
func (inv *invocation) globalFlags(help *bool) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flotilla", pflag.ContinueOnError)
	fs.StringVar(&inv.server, "server", inv.server, "`URL` of the hub's HTTP API; $FLOTILLA_SERVER sets the default")
	fs.DurationVar(&inv.timeout, "timeout", inv.timeout, "time limit of each request to the hub, as a `DURATION` such as 30s (0 means none)")
	fs.BoolVarP(help, "help", "h", false, "show help and exit")
	return fs
}

// checkGlobals rejects a --server or --timeout no request could use.
func (inv *invocation) checkGlobals() error {
	u, err := url.Parse(inv.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return inv.usagef("invalid --server %q: must be an http:// or https:// URL such as %s", inv.server, defaultServer)
	}
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
