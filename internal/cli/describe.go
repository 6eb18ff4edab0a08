package cli

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// maxDescribedEvents is how many of the latest events describe shows.
const maxDescribedEvents = 20

func describeCommand() *command {
	return &command{
		name:  "describe",
		usage: "describe cluster NAME",
		short: "Show everything the hub knows about a cluster",
		long: `Show one cluster in detail: labels, provider, region and zone, taints with
how long ago each was added, conditions, nodes and resources, the agent's
connection, the cluster's lease and its latest events.`,
		example: `  flotilla describe cluster edge-1
`,
		bind: func(*pflag.FlagSet) runFunc { return runDescribe },
	}
}

func runDescribe(ctx context.Context, inv *invocation, args []string) error {
	name, rest, err := parseClusterTarget(inv, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return inv.usagef("too many arguments %q: describe takes one cluster name", rest)
	}
	d, err := fetchClusterDetails(ctx, inv.client(), name)
	if err != nil {
		return err
	}
	return writeClusterDescription(inv.Stdout, d, inv.Now())
}

// parseClusterTarget checks that args start with "cluster NAME" and
// returns the name and the arguments after it.
func parseClusterTarget(inv *invocation, args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, inv.usagef("missing the resource type and name; expected: cluster NAME")
	}
	if args[0] != "cluster" && args[0] != "clusters" {
		return "", nil, inv.usagef("unknown resource type %q; supported: cluster", args[0])
	}
	if len(args) < 2 {
		return "", nil, inv.usagef("missing the cluster name; expected: cluster NAME")
	}
	if err := checkName(inv, args[1]); err != nil {
		return "", nil, err
	}
	return args[1], args[2:], nil
}

// clusterDetails is what describe shows of a cluster.
type clusterDetails struct {
	cluster *v1alpha1.Cluster
	lease   *coordinationv1.Lease // nil when the cluster has none
	events  []corev1.Event        // oldest first
}

// fetchClusterDetails reads the cluster, its lease and its events. A
// missing lease or event list is shown as <none>, not an error.
func fetchClusterDetails(ctx context.Context, c *client, name string) (*clusterDetails, error) {
	cl, err := c.getCluster(ctx, name)
	if err != nil {
		return nil, err
	}
	d := &clusterDetails{cluster: cl}
	d.lease, err = c.getLease(ctx, name)
	if apierrors.IsNotFound(err) {
		d.lease, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lease of cluster %q: %w", name, err)
	}
	d.events, err = c.clusterEvents(ctx, name)
	if apierrors.IsNotFound(err) {
		d.events, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}
