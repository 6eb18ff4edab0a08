package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/hub/apiserver"
)

// kubeconfigCommand prints the hub's admin kubeconfig, optionally pointed
// at another server address: the way to get it out of a hub that runs in a
// pod whose image has nothing but flotilla-hub (kubectl exec ... kubeconfig).
func kubeconfigCommand(args []string, stdout, stderr io.Writer) error {
	var dataDir, server string
	fs := newKubeconfigFlags(&dataDir, &server)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flotilla-hub kubeconfig [--data-dir DIR] [--server URL] > hub.kubeconfig\n\n"+
			"Prints the admin kubeconfig of the hub with this data directory (full rights: keep it safe).\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kubeconfig takes no arguments, got %q", fs.Args())
	}
	path := apiserver.AdminKubeconfigPath(dataDir)
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--data-dir %s: no admin kubeconfig; start flotilla-hub with this --data-dir first", dataDir)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if server != "" {
		u, err := url.Parse(server)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--server %q: want https://HOST:PORT", server)
		}
		for _, c := range cfg.Clusters {
			c.Server = server
		}
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	_, err = stdout.Write(out)
	return err
}

// newKubeconfigFlags returns the kubeconfig command's flags, bound to
// dataDir and server.
func newKubeconfigFlags(dataDir, server *string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("flotilla-hub kubeconfig", pflag.ContinueOnError)
	fs.StringVar(dataDir, "data-dir", "flotilla-data", "the hub's data directory")
	fs.StringVar(server, "server", "", "API address to write instead of the hub's own, e.g. https://hub.example.com:6443 (its host must be in the serving certificate: --tls-san)")
	return fs
}
