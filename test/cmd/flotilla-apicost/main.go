// Command flotilla-apicost measures what one write of a hot kind costs the
// API server in CPU, served as a CRD on the hub's embedded kube-apiserver
// (as today) or compiled into a k8s.io/apiserver generic API server, with
// JSON or CBOR on the wire and in storage; a ConfigMap on the
// kube-apiserver is the reference. Each server runs in its own process (this
// binary, re-executed with "serve") on one etcd from the testbin, so that
// its CPU is measured apart from the clients'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// serverKind names a way of serving the kinds.
type serverKind string

const (
	crdJSON     serverKind = "crd"
	crdCBOR     serverKind = "crd-cbor"
	builtinJSON serverKind = "builtin"
	builtinCBOR serverKind = "builtin-cbor"
)

type runOptions struct {
	testbin          string
	servers          []serverKind
	objects, clients int
	repeat           int
	idle             time.Duration
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serveMain(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "flotilla-apicost serve:", err)
			os.Exit(1)
		}
		return
	}
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-apicost:", err)
		os.Exit(2)
	}
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-apicost:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (runOptions, error) {
	fs := flag.NewFlagSet("flotilla-apicost", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: flotilla-apicost [flags]

Measures the API server's CPU per write (create; update = GET from the
watch cache + PUT; status update) of a ResourceBinding with spec and
aggregated status for 3 clusters (~1.6 KB), served as:
  crd           a CRD on the hub's embedded kube-apiserver, JSON (today)
  crd-cbor      the same with CBORServingAndStorage on: CBOR on the wire (CRD
                objects are still stored as JSON)
  builtin       compiled into a k8s.io/apiserver generic API server, JSON
  builtin-cbor  the same, CBOR on the wire and in storage
The crd servers also measure a ConfigMap of the same size, the built-in
reference. Idle CPU, measured before the writes, is subtracted.

Flags:
`)
		fs.PrintDefaults()
	}
	var o runOptions
	var servers string
	fs.StringVar(&o.testbin, "testbin", envOr("FLOTILLA_TESTBIN", ".testbin"), "folder with the etcd binary (make testbin)")
	fs.StringVar(&servers, "servers", "crd,builtin,builtin-cbor,crd-cbor", "comma-separated servers to measure, in order")
	fs.IntVar(&o.objects, "objects", 3000, "objects (and so writes) per measured batch")
	fs.IntVar(&o.clients, "clients", 16, "client goroutines writing at once")
	fs.IntVar(&o.repeat, "repeat", 2, "batches per server and kind, to see the noise")
	fs.DurationVar(&o.idle, "idle", 3*time.Second, "how long to measure each server's idle CPU before writing")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range strings.Split(servers, ",") {
		switch k := serverKind(strings.TrimSpace(s)); k {
		case crdJSON, crdCBOR, builtinJSON, builtinCBOR:
			o.servers = append(o.servers, k)
		default:
			return o, fmt.Errorf("--servers: unknown server %q", s)
		}
	}
	if o.objects < 1 || o.clients < 1 || o.repeat < 1 {
		return o, fmt.Errorf("--objects, --clients and --repeat must be at least 1")
	}
	return o, nil
}

func serveMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	kind := fs.String("server", "", "server kind")
	dir := fs.String("dir", "", "the server's folder")
	etcd := fs.String("etcd", "", "etcd URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serve(ctx, serverKind(*kind), *dir, *etcd)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
