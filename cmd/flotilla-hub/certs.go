package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/join"
)

// issueOptions are the flags of certs issue.
type issueOptions struct {
	dataDir, cluster, out string
	timeout               time.Duration
}

// newIssueFlags returns the flags of certs issue, bound to o.
func newIssueFlags(o *issueOptions) *pflag.FlagSet {
	flags := pflag.NewFlagSet("flotilla-hub certs issue", pflag.ContinueOnError)
	flags.StringVar(&o.dataDir, "data-dir", "flotilla-data", "hub data folder: the hub CA (pki/ca.crt) goes into --out as ca.crt, the agent CA (pki/agent-ca.crt, pki/agent-ca.key) signs the certificate")
	flags.StringVar(&o.cluster, "cluster", "", "cluster name the certificate identifies (CommonName cluster:NAME)")
	flags.StringVar(&o.out, "out", "", "folder to write ca.crt, tls.crt and tls.key into, for the agent's --cert-dir")
	flags.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the hub's API (a hub starting) to register the cluster")
	return flags
}

func issueCerts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o issueOptions
	flags := newIssueFlags(&o)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flotilla-hub certs issue --data-dir DIR --cluster NAME --out DIR\n\n"+
			"Signs a client certificate for the agent of cluster NAME with the agent CA, for sites\n"+
			"where agents cannot join with a bootstrap token. Like a join, it registers the\n"+
			"cluster and records the certificate's serial on its Cluster through the hub's API,\n"+
			"as the hub (DATA/admin.kubeconfig impersonating flotilla:hub, the only user that may\n"+
			"write the serial; the hub must be running): the cluster's older certificates are\n"+
			"refused from then on.\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if o.cluster == "" || o.out == "" {
		flags.Usage()
		return errors.New("--cluster and --out are required")
	}
	if msgs := validation.IsDNS1123Subdomain(o.cluster); len(msgs) > 0 {
		return fmt.Errorf("--cluster %q: %v", o.cluster, msgs)
	}
	// The hub creates its CA before it writes the kubeconfig: waiting for
	// the kubeconfig first means this never creates a second CA beside a
	// hub starting on the same data directory.
	if err := waitForFile(ctx, apiserver.AdminKubeconfigPath(o.dataDir), o.timeout); err != nil {
		return fmt.Errorf("certs issue needs flotilla-hub running with --data-dir %s (it registers the cluster in the hub's API): %w", o.dataDir, err)
	}
	record := func(serial *big.Int) error { return recordSerial(ctx, o.dataDir, o.cluster, serial, o.timeout) }
	if err := ca.IssueAgentCertificate(o.dataDir, o.cluster, o.out, record); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote ca.crt, tls.crt and tls.key for cluster %s to %s\n", o.cluster, o.out)
	return nil
}

// recordSerial records serial as cluster's certificate through the hub's
// API, registering the cluster: sessions need a registered cluster. It
// acts as the hub (apiserver.AsHub), the only user admission lets write
// the serial. It waits up to timeout for the hub (which may be starting)
// to write its admin kubeconfig and answer.
func recordSerial(ctx context.Context, dataDir, cluster string, serial *big.Int, timeout time.Duration) error {
	kubeconfig := apiserver.AdminKubeconfigPath(dataDir)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		client, err := hubClient(dataDir, kubeconfig)
		if err != nil {
			last = err
			return false, nil
		}
		last = join.RecordSerial(ctx, client, cluster, serial, join.Registration{})
		return last == nil || !transient(last), nil
	})
	if last != nil {
		return fmt.Errorf("register cluster %s in the hub's API (certs issue needs flotilla-hub running with --data-dir %s): %w", cluster, dataDir, last)
	}
	return err
}

// waitForFile waits up to timeout for path to exist.
func waitForFile(ctx context.Context, path string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, last = os.Stat(path)
		return last == nil, nil
	})
	if last != nil {
		return last
	}
	return err
}

// hubClient reaches the hub's API as the hub, once the hub wrote the
// admin kubeconfig.
func hubClient(dataDir, kubeconfig string) (flotillaclient.Interface, error) {
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, err
	}
	cfg, err := apiserver.AsHub(dataDir)
	if err != nil {
		return nil, err
	}
	return flotillaclient.NewForConfig(cfg)
}

// transient: the API did not answer, answered that it cannot now, or
// does not serve Clusters yet (a starting hub installs its CRDs after its
// API server answers).
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: connection refused, TLS, timeout
	}
	code := status.Status().Code
	return code >= 500 || code == 429 || code == 404
}
