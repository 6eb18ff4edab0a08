// Command helmrelease installs, upgrades and uninstalls a Helm release on a
// real cluster with the Helm Go SDK, as `helm install`, `helm upgrade` and
// `helm uninstall` would (there is no helm binary on the test machines).
// End-to-end tests use it to install charts/flotilla-agent into member
// clusters with real nodes exactly as a user does.
//
//	helmrelease install   --kubeconfig K -n NS --name R [--create-namespace] [--set k=v]... [--wait] CHART_DIR
//	helmrelease upgrade   --kubeconfig K -n NS --name R [--reuse-values] [--set k=v]... [--wait] CHART_DIR
//	helmrelease uninstall --kubeconfig K -n NS --name R [--wait]
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "helmrelease: %v\n", err)
		}
		os.Exit(1)
	}
}

// options are the flags of every subcommand.
type options struct {
	kubeconfig, namespace, release string
	createNamespace, reuseValues   bool
	wait                           bool
	timeout                        time.Duration
	values                         values.Options
}

const usage = `Usage: helmrelease install|upgrade|uninstall [flags] [CHART_DIR]

Installs (install, upgrade: CHART_DIR) or removes (uninstall) a release on
the cluster --kubeconfig names, with the Helm Go SDK.

`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a subcommand is needed: install, upgrade or uninstall")
	}
	verb := args[0]
	var o options
	fs := pflag.NewFlagSet("helmrelease "+verb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	fs.StringVarP(&o.namespace, "namespace", "n", "default", "release namespace")
	fs.StringVar(&o.release, "name", "", "release name (required)")
	fs.BoolVar(&o.createNamespace, "create-namespace", false, "install: create the release namespace if it is missing")
	fs.BoolVar(&o.reuseValues, "reuse-values", false, "upgrade: start from the release's last values")
	fs.BoolVar(&o.wait, "wait", false, "wait until the release's resources are ready (install, upgrade) or gone (uninstall)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --wait waits")
	fs.StringArrayVarP(&o.values.ValueFiles, "values", "f", nil, "values file (repeatable)")
	fs.StringArrayVar(&o.values.Values, "set", nil, "KEY=VALUE, as helm --set (repeatable)")
	fs.StringArrayVar(&o.values.StringValues, "set-string", nil, "KEY=VALUE, as helm --set-string (repeatable)")
	fs.Usage = func() { fmt.Fprintf(stderr, "%s%s", usage, fs.FlagUsages()) }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.kubeconfig == "" || o.release == "" {
		return errors.New("--kubeconfig and --name are required")
	}
	cfg, err := configuration(o, stderr)
	if err != nil {
		return err
	}
	switch verb {
	case "install", "upgrade":
		if fs.NArg() != 1 {
			return fmt.Errorf("%s needs exactly one CHART_DIR", verb)
		}
		return installOrUpgrade(cfg, o, verb, fs.Arg(0), stdout)
	case "uninstall":
		if fs.NArg() != 0 {
			return errors.New("uninstall takes no CHART_DIR")
		}
		u := action.NewUninstall(cfg)
		u.Wait, u.Timeout = o.wait, o.timeout
		res, err := u.Run(o.release)
		if err != nil {
			return fmt.Errorf("uninstall %s: %w", o.release, err)
		}
		fmt.Fprintf(stdout, "release %s uninstalled\n%s", o.release, res.Info)
		return nil
	default:
		fs.Usage()
		return fmt.Errorf("unknown subcommand %q: want install, upgrade or uninstall", verb)
	}
}

// configuration is the Helm action configuration for o's cluster and
// namespace, releases stored in Secrets as helm does by default.
func configuration(o options, stderr io.Writer) (*action.Configuration, error) {
	settings := cli.New()
	settings.KubeConfig = o.kubeconfig
	settings.SetNamespace(o.namespace)
	cfg := new(action.Configuration)
	logger := log.New(stderr, "helm: ", 0)
	if err := cfg.Init(settings.RESTClientGetter(), o.namespace, "secret", logger.Printf); err != nil {
		return nil, fmt.Errorf("helm configuration for %s: %w", o.kubeconfig, err)
	}
	return cfg, nil
}

// installOrUpgrade runs helm install or helm upgrade of the chart in dir.
func installOrUpgrade(cfg *action.Configuration, o options, verb, dir string, stdout io.Writer) error {
	vals, err := o.values.MergeValues(getter.Providers{})
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", dir, err)
	}
	if verb == "install" {
		i := action.NewInstall(cfg)
		i.ReleaseName, i.Namespace, i.CreateNamespace = o.release, o.namespace, o.createNamespace
		i.Wait, i.Timeout = o.wait, o.timeout
		rel, err := i.Run(chrt, vals)
		if err != nil {
			return fmt.Errorf("install %s: %w", o.release, err)
		}
		fmt.Fprintf(stdout, "release %s installed: revision %d, %s\n", rel.Name, rel.Version, rel.Info.Status)
		return nil
	}
	u := action.NewUpgrade(cfg)
	u.Namespace, u.ReuseValues = o.namespace, o.reuseValues
	u.Wait, u.Timeout = o.wait, o.timeout
	rel, err := u.Run(o.release, chrt, vals)
	if err != nil {
		return fmt.Errorf("upgrade %s: %w", o.release, err)
	}
	fmt.Fprintf(stdout, "release %s upgraded: revision %d, %s\n", rel.Name, rel.Version, rel.Info.Status)
	return nil
}
