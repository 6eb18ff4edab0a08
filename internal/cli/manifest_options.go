package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// manifestOptions are the flags apply and delete share: what to read and
// the default namespace.
type manifestOptions struct {
	files     []string
	namespace string
	recursive bool
}

func (o *manifestOptions) bind(fs *pflag.FlagSet, verb string) {
	fs.StringSliceVarP(&o.files, "filename", "f", nil,
		"`FILE`, directory or - (stdin) with the objects to "+verb+"; repeat or separate with commas")
	fs.StringVarP(&o.namespace, "namespace", "n", "",
		"`NAMESPACE` of the objects that do not name one (else the kubeconfig context's, or default)")
	fs.BoolVarP(&o.recursive, "recursive", "R", false, "read the subdirectories of directories given with -f too")
}

// load checks the command line, then reads and checks every object. Any
// problem in any document fails the whole command before anything is sent.
func (o *manifestOptions) load(inv *invocation, args []string) ([]manifest, error) {
	if err := o.check(inv, args); err != nil {
		return nil, err
	}
	sources, err := readSources(inv.Stdin, o.files, o.recursive)
	if err != nil {
		return nil, err
	}
	manifests, problems := loadManifests(sources)
	if len(problems) > 0 {
		return nil, &problemsError{
			summary:  fmt.Sprintf("%s in the input; nothing was sent to the hub", countNoun(len(problems), "problem")),
			problems: problems,
		}
	}
	if len(manifests) == 0 {
		return nil, fmt.Errorf("no objects in %s", strings.Join(sourceNames(sources), ", "))
	}
	return manifests, nil
}

// check rejects a command line that names nothing to read.
func (o *manifestOptions) check(inv *invocation, args []string) error {
	if len(args) > 0 {
		return inv.usagef("unexpected arguments %q: give the files with -f", args)
	}
	if len(o.files) == 0 {
		return inv.usagef("missing -f: give a file, a directory or - to read standard input")
	}
	stdin := 0
	for _, f := range o.files {
		switch f {
		case "":
			return inv.usagef("invalid -f \"\": must be a file, a directory or -")
		case "-":
			stdin++
		}
	}
	if stdin > 1 {
		return inv.usagef("-f - given %d times: standard input can be read only once", stdin)
	}
	if o.namespace != "" {
		return checkNamespace(inv, o.namespace)
	}
	return nil
}

func sourceNames(sources []source) []string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.name
	}
	return names
}

// problemsError lists every problem found in the input, or every cause the
// hub gave for refusing an object.
type problemsError struct {
	summary  string
	problems []problem
}

func (e *problemsError) Error() string {
	var b strings.Builder
	b.WriteString(e.summary + ":")
	for _, p := range e.problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// countNoun is "1 problem" or "3 problems".
func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
