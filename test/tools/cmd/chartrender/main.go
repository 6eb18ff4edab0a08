// Command chartrender renders a Helm chart the way `helm install --dry-run`
// would, with the Helm Go SDK and no cluster: it lints the chart (strict:
// warnings fail), checks the values against values.schema.json, and prints
// the rendered manifests to stdout. End-to-end tests use it to turn
// charts/flotilla-agent and charts/flotilla-hub into the objects they apply
// to real kube-apiservers; there is no helm binary on the test machines.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint/support"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "chartrender: %v\n", err)
			os.Exit(1)
		}
	}
}

// options are the command's flags.
type options struct {
	release     string
	namespace   string
	kubeVersion string
	notesFile   string
	skipLint    bool
	values      values.Options
}

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("chartrender", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.release, "name", "flotilla-agent", "release name")
	fs.StringVarP(&o.namespace, "namespace", "n", "flotilla-system", "release namespace")
	fs.StringVar(&o.kubeVersion, "kube-version", "v1.37.2", "Kubernetes version the chart is rendered for (.Capabilities.KubeVersion)")
	fs.StringVar(&o.notesFile, "notes-out", "", "also write the rendered NOTES.txt to this file")
	fs.BoolVar(&o.skipLint, "skip-lint", false, "render without linting first")
	fs.StringArrayVarP(&o.values.ValueFiles, "values", "f", nil, "values file (repeatable)")
	fs.StringArrayVar(&o.values.Values, "set", nil, "KEY=VALUE, as helm --set (repeatable)")
	fs.StringArrayVar(&o.values.StringValues, "set-string", nil, "KEY=VALUE, as helm --set-string (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: chartrender [flags] CHART_DIR\n\nLints CHART_DIR strictly and prints its rendered manifests.\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("exactly one CHART_DIR is needed")
	}
	return render(o, fs.Arg(0), stdout)
}

// render lints and renders the chart in dir with o's values.
func render(o options, dir string, stdout io.Writer) error {
	vals, err := o.values.MergeValues(getter.Providers{})
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	kv, err := chartutil.ParseKubeVersion(o.kubeVersion)
	if err != nil {
		return fmt.Errorf("--kube-version: %w", err)
	}
	if !o.skipLint {
		if err := lint(dir, o.namespace, kv, vals); err != nil {
			return err
		}
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", dir, err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = o.release
	install.Namespace = o.namespace
	install.KubeVersion = kv
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	if o.notesFile != "" {
		if err := os.WriteFile(o.notesFile, []byte(rel.Info.Notes), 0o644); err != nil {
			return err
		}
	}
	_, err = io.WriteString(stdout, rel.Manifest)
	return err
}

// lint runs helm lint --strict: any warning or error fails.
func lint(dir, namespace string, kv *chartutil.KubeVersion, vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	l.KubeVersion = kv
	res := l.Run([]string{dir}, vals)
	var problems []string
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			problems = append(problems, m.Error())
		}
	}
	for _, e := range res.Errors {
		problems = append(problems, e.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("lint %s:\n  %s", dir, strings.Join(problems, "\n  "))
	}
	return nil
}
