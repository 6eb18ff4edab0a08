package cli

import (
	"context"
	"fmt"
	"strings"

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
		usage: "describe cluster|binding|clusterbinding|workloadrebalancer NAME [-n NAMESPACE]",
		short: "Show everything the hub knows about a cluster, a binding or a rebalancer",
		long: `Show one object in detail, read from the hub's Kubernetes API: the object,
and what belongs with it (the cluster's coordination.k8s.io Lease, the
binding's Works) and the events about it (core/v1 Events selected by
involvedObject). Only reads: ClusterRole flotilla-viewer allows it.

  cluster NAME          labels, provider, region and zone, taints with how long
                        ago each was added, conditions, nodes and resources, the
                        agent's connection, the cluster's lease and its latest
                        events
  binding NAME          a ResourceBinding (rb) of the kubeconfig context's
                        namespace (default), or of -n:
                        its template and replicas, the placement it was scheduled
                        with, its conditions, every cluster it runs on or is being
                        evicted from (replicas, applied, health, status), its
                        Works and its latest events
  clusterbinding NAME   the same for a ClusterResourceBinding (crb)
  workloadrebalancer NAME
                        a WorkloadRebalancer (flotilla rebalance): its TTL, whether
                        it finished, the result of every workload and its events

A binding is named after its template and the template's kind in lower case:
the Deployment nginx has the binding nginx-deployment.`,
		example: `  flotilla describe cluster edge-1

  # Where the Deployment nginx of namespace shop runs, and why
  flotilla describe binding nginx-deployment -n shop

  # What a rebalance did
  flotilla describe workloadrebalancer rebalance-20260501-120000
`,
		bind: bindDescribe,
	}
}

// describeKind is a kind describe shows.
type describeKind int

const (
	describeCluster describeKind = iota
	describeBinding
	describeClusterBinding
	describeRebalancer
)

// describeKinds maps every accepted spelling to its kind.
var describeKinds = map[string]describeKind{
	"cluster": describeCluster, "clusters": describeCluster,
	"binding": describeBinding, "bindings": describeBinding, "resourcebinding": describeBinding,
	"resourcebindings": describeBinding, "rb": describeBinding,
	"clusterbinding": describeClusterBinding, "clusterbindings": describeClusterBinding,
	"clusterresourcebinding": describeClusterBinding, "clusterresourcebindings": describeClusterBinding,
	"crb":                describeClusterBinding,
	"workloadrebalancer": describeRebalancer, "workloadrebalancers": describeRebalancer,
	"rebalancer": describeRebalancer, "rebalancers": describeRebalancer,
}

const describeKindNames = "cluster, binding, clusterbinding, workloadrebalancer"

type describeOptions struct {
	namespace string
}

func bindDescribe(fs *pflag.FlagSet) runFunc {
	o := &describeOptions{}
	fs.StringVarP(&o.namespace, "namespace", "n", "", "`NAMESPACE` of a binding (else the kubeconfig context's, or default)")
	return o.run
}

func (o *describeOptions) run(ctx context.Context, inv *invocation, args []string) error {
	kind, name, err := parseDescribeArgs(inv, args)
	if err != nil {
		return err
	}
	if o.namespace != "" {
		if err := checkNamespace(inv, o.namespace); err != nil {
			return err
		}
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	switch kind {
	case describeBinding:
		ns := o.namespace
		if ns == "" {
			if ns, err = inv.defaultNamespace(); err != nil {
				return err
			}
		}
		return describeBindingNamed(ctx, inv, c, ns, name)
	case describeClusterBinding:
		return describeBindingNamed(ctx, inv, c, "", name)
	case describeRebalancer:
		return describeRebalancerNamed(ctx, inv, c, name)
	}
	d, err := fetchClusterDetails(ctx, c, name)
	if err != nil {
		return err
	}
	return writeClusterDescription(inv.Stdout, d, inv.Now())
}

// parseDescribeArgs checks "KIND NAME".
func parseDescribeArgs(inv *invocation, args []string) (describeKind, string, error) {
	if len(args) == 0 {
		return 0, "", inv.usagef("missing the resource type and name; supported types: %s", describeKindNames)
	}
	kind, ok := describeKinds[strings.ToLower(args[0])]
	if !ok {
		return 0, "", inv.usagef("unknown resource type %q; supported: %s", args[0], describeKindNames)
	}
	switch len(args) {
	case 1:
		return 0, "", inv.usagef("missing the name of the %s", strings.ToLower(args[0]))
	case 2:
		return kind, args[1], checkName(inv, args[1])
	}
	return 0, "", inv.usagef("too many arguments %q: describe takes one name", args[2:])
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
func fetchClusterDetails(ctx context.Context, c *hubClients, name string) (*clusterDetails, error) {
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
	d.events, err = c.objectEvents(ctx, v1alpha1.KindCluster, "", name)
	if err != nil {
		return nil, err
	}
	return d, nil
}
