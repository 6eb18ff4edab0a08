package cli

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
)

func purgeCommand() *command {
	return &command{
		name:  "purge",
		usage: "purge binding|clusterbinding NAME --cluster CLUSTER [-n NAMESPACE]",
		short: "End an eviction task now: remove the workload's old copy from a cluster",
		long: `End a binding's graceful eviction task from CLUSTER by hand. The hub then
removes the workload's copy from that cluster (at once if the cluster's agent
is connected, else when it reconnects).

Tasks of purgeMode Never wait for this; any other task can be ended early the
same way, when you do not want to wait for the replacement to be healthy or the
grace period to run out. "flotilla describe binding" lists the tasks and what
each waits for.`,
		example: `  flotilla purge binding nginx-deployment -n web --cluster member-1
`,
		bind: bindPurge,
	}
}

type purgeOptions struct {
	namespace, cluster string
}

func bindPurge(fs *pflag.FlagSet) runFunc {
	o := &purgeOptions{}
	fs.StringVarP(&o.namespace, "namespace", "n", "", "`NAMESPACE` of a binding (else default)")
	fs.StringVar(&o.cluster, "cluster", "", "the `CLUSTER` whose eviction task ends (required)")
	return o.run
}

func (o *purgeOptions) run(ctx context.Context, inv *invocation, args []string) error {
	kind, name, err := parseDescribeArgs(inv, args)
	if err != nil {
		return err
	}
	if o.cluster == "" {
		return inv.usagef("--cluster is required: the cluster whose eviction task ends")
	}
	if err := checkName(inv, o.cluster); err != nil {
		return err
	}
	var path string
	switch kind {
	case describeBinding:
		ns := cmp.Or(o.namespace, defaultNamespace)
		if err := checkNamespace(inv, ns); err != nil {
			return err
		}
		path = objectPath(bindingsResource, ns, name) + "/purge"
	case describeClusterBinding:
		path = objectPath(clusterBindingsResource, "", name) + "/purge"
	default:
		return inv.usagef("purge works on a binding or clusterbinding, not %q", args[0])
	}
	if _, err := inv.client().do(ctx, http.MethodPost, path, url.Values{"cluster": {o.cluster}}, nil); err != nil {
		return err
	}
	fmt.Fprintf(inv.Stdout, "%s/%s: eviction task from %s ended; its copy there is being removed\n", strings.ToLower(args[0]), name, o.cluster)
	return nil
}
