package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/hub/ca"
	"github.com/flotilla-io/flotilla/hub/join"
)

func issueCerts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := pflag.NewFlagSet("flotilla-hub certs issue", pflag.ContinueOnError)
	flags.SetOutput(stderr)
	dataDir := flags.String("data-dir", "flotilla-data", "hub data folder; its CA (pki/ca.crt, pki/ca.key) is created if missing")
	cluster := flags.String("cluster", "", "cluster name the certificate identifies (CommonName cluster:NAME)")
	out := flags.String("out", "", "folder to write ca.crt, tls.crt and tls.key into, for the agent's --cert-dir")
	timeout := flags.Duration("timeout", time.Minute, "how long to wait for the hub's API to record the certificate's serial")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flotilla-hub certs issue --data-dir DIR --cluster NAME --out DIR\n\n"+
			"Signs a client certificate for the agent of cluster NAME with the hub CA, for sites\n"+
			"where agents cannot join with a bootstrap token. Like a join, it records the\n"+
			"certificate's serial on the Cluster through the hub's API (DATA/admin.kubeconfig),\n"+
			"registering the Cluster if new: the cluster's older certificates are refused from\n"+
			"then on. A hub that never ran with DATA records nothing (there is nothing to supersede).\n\nFlags:\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *cluster == "" || *out == "" {
		flags.Usage()
		return errors.New("--cluster and --out are required")
	}
	record := func(serial *big.Int) error { return recordSerial(ctx, *dataDir, *cluster, serial, *timeout, stderr) }
	if err := ca.IssueAgentCertificate(*dataDir, *cluster, *out, record); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote ca.crt, tls.crt and tls.key for cluster %s to %s\n", *cluster, *out)
	return nil
}

// recordSerial records serial as cluster's certificate through the hub's
// API, waiting up to timeout for the API to answer (the hub may be
// starting).
func recordSerial(ctx context.Context, dataDir, cluster string, serial *big.Int, timeout time.Duration, stderr io.Writer) error {
	kubeconfig := apiserver.AdminKubeconfigPath(dataDir)
	if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "note: no hub has run with --data-dir %s yet: the serial is not recorded (no Cluster %s to supersede)\n", dataDir, cluster)
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("%s: %w", kubeconfig, err)
	}
	client, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = join.RecordSerial(ctx, client, cluster, serial, join.Registration{})
		return last == nil || !transient(last), nil
	})
	if last != nil {
		return fmt.Errorf("record the certificate's serial in the hub's API (is the hub running with --data-dir %s?): %w", dataDir, last)
	}
	return err
}

// transient: the API did not answer, or answered that it cannot now.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: connection refused, TLS, timeout
	}
	code := status.Status().Code
	return code >= 500 || code == 429
}
