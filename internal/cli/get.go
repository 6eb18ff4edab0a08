package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func getCommand() *command {
	return &command{
		name:  "get",
		usage: "get RESOURCE [NAME] [-n NAMESPACE | -A] [--cluster NAME] [-o wide|json|yaml]",
		short: "List clusters, leases, policies, bindings, works, resource templates or rebalancers",
		long: `List objects of the hub's Kubernetes API as a table, or print them as the hub
sent them (without metadata.managedFields, as kubectl prints them), as JSON
or YAML. Every list and get is a read of the API (RBAC verbs get and list;
ClusterRole flotilla-viewer grants them).

Resources:
  clusters          member clusters: readiness, taints, Kubernetes version, nodes
  leases            the agents' leases: when each was last renewed and whether it
                    is fresh (missed at most one renewal), late, or expired
  policies          PropagationPolicies (pp): priority, what they select, how
                    replicas are scheduled
  clusterpolicies   ClusterPropagationPolicies (cpp)
  bindings          ResourceBindings (rb), one per propagated template: the
                    clusters it was scheduled to and whether it is applied there
                    (-o wide: evictions in progress, health per cluster)
  clusterbindings   ClusterResourceBindings (crb), of cluster-scoped templates
  works             what each cluster must run for each binding: the generation,
                    the one its agent acknowledged, and whether it was applied
  resources         the resource templates that have a binding (any kind:
                    Deployments, ConfigMaps, ...), with readiness summed over
                    clusters
  workloadrebalancers
                    rebalances (flotilla rebalance): how many workloads
                    succeeded or failed, when it finished, its TTL

Singular names and the long names (propagationpolicies, resourcebindings, ...)
work too.

Policies and bindings are read from the namespace of the kubeconfig context
(default unless it names another) unless -n names one; -A reads every
namespace. Works are read from every cluster unless --cluster (or -n
flotilla-es-CLUSTER) picks one. Resource templates are read from every
namespace unless -n picks one; a NAME picks the templates of that name.`,
		example: `  # All clusters, and more columns
  flotilla get clusters
  flotilla get clusters -o wide

  # One cluster as YAML
  flotilla get cluster edge-1 -o yaml

  # Lease freshness of every cluster
  flotilla get leases

  # Where the workloads of namespace shop run, and how healthy they are there
  flotilla get bindings -n shop -o wide

  # Policies of every namespace
  flotilla get pp -A

  # What the agent of edge-1 must run, and what it has acknowledged
  flotilla get works --cluster edge-1

  # Every resource template, and how many replicas are ready
  flotilla get resources

  # Rebalances and their results
  flotilla get workloadrebalancers
`,
		bind: bindGet,
	}
}

// resourceScope says where objects of a kind live, so which of -n, -A and
// --cluster apply.
type resourceScope int

const (
	// clusterScoped kinds have one list; -n and -A are ignored, as kubectl
	// ignores them.
	clusterScoped resourceScope = iota
	// namespaced kinds are read from one namespace (-n, else the
	// kubeconfig context's) or from all of them (-A).
	namespaced
	// perCluster kinds (Works) live in a namespace per cluster; they are
	// read from every cluster unless --cluster or -n picks one.
	perCluster
	// filtered kinds (resource templates) are read from every namespace
	// unless -n picks one; a name picks the templates of that name.
	filtered
)

// getResource is a resource type "get" can show.
type getResource struct {
	plural string
	names  []string // every accepted spelling
	scope  resourceScope
	// client is the REST client of the resource's API group, resource
	// the resource and, for leases, namespace the namespace all of them
	// live in.
	client    func(c *hubClients) rest.Interface
	resource  string
	namespace string
	table     func(raw []byte, o tableOptions) (*table, error)
}

func flotillaREST(c *hubClients) rest.Interface { return c.flotilla.FlotillaV1alpha1().RESTClient() }

func appsREST(c *hubClients) rest.Interface { return c.flotilla.AppsV1alpha1().RESTClient() }

func coordinationREST(c *hubClients) rest.Interface { return c.kube.CoordinationV1().RESTClient() }

var getResources = []getResource{
	{
		plural: "clusters", names: []string{"clusters", "cluster"},
		client: flotillaREST, resource: clustersResource, table: clustersTable,
	},
	{
		plural: "leases", names: []string{"leases", "lease"},
		client: coordinationREST, resource: leasesResource, namespace: v1alpha1.LeaseNamespace, table: leasesTable,
	},
	{
		plural: "policies", scope: namespaced,
		names:  []string{"policies", "policy", "propagationpolicies", "propagationpolicy", "pp"},
		client: flotillaREST, resource: policiesResource, table: policiesTable,
	},
	{
		plural: "clusterpolicies",
		names: []string{"clusterpolicies", "clusterpolicy", "clusterpropagationpolicies",
			"clusterpropagationpolicy", "cpp"},
		client: flotillaREST, resource: clusterPoliciesResource, table: policiesTable,
	},
	{
		plural: "bindings", scope: namespaced,
		names:  []string{"bindings", "binding", "resourcebindings", "resourcebinding", "rb"},
		client: flotillaREST, resource: bindingsResource, table: bindingsTable,
	},
	{
		plural: "clusterbindings",
		names: []string{"clusterbindings", "clusterbinding", "clusterresourcebindings",
			"clusterresourcebinding", "crb"},
		client: flotillaREST, resource: clusterBindingsResource, table: bindingsTable,
	},
	{
		plural: "works", scope: perCluster, names: []string{"works", "work"},
		client: flotillaREST, resource: worksResource, table: worksTable,
	},
	{
		plural: "resources", scope: filtered, names: []string{"resources", "resource"},
		table: templatesTable,
	},
	{
		plural: "workloadrebalancers",
		names:  []string{"workloadrebalancers", "workloadrebalancer", "rebalancers", "rebalancer"},
		client: appsREST, resource: rebalancersResource, table: rebalancersTable,
	},
}

func findGetResource(name string) (getResource, bool) {
	name = strings.ToLower(name)
	for _, r := range getResources {
		for _, n := range r.names {
			if n == name {
				return r, true
			}
		}
	}
	return getResource{}, false
}

type getOptions struct {
	output        string
	namespace     string
	allNamespaces bool
	cluster       string
}

func bindGet(fs *pflag.FlagSet) runFunc {
	o := &getOptions{}
	fs.StringVarP(&o.output, "output", "o", "", "output `FORMAT`: wide, json or yaml (default a table)")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "read policies, bindings, works or resources of `NAMESPACE`")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "read policies or bindings of every namespace")
	fs.StringVar(&o.cluster, "cluster", "", "read the works of cluster `NAME` only")
	return o.run
}

func (o *getOptions) run(ctx context.Context, inv *invocation, args []string) error {
	format, err := parseOutput(o.output)
	if err != nil {
		return inv.usagef("%v", err)
	}
	res, name, err := parseGetArgs(inv, args)
	if err != nil {
		return err
	}
	target, err := o.target(inv, res, name)
	if err != nil {
		return err
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	raw, single, err := res.fetch(ctx, c, target, inv.Stderr)
	if err != nil {
		return err
	}
	if format == outputJSON || format == outputYAML {
		return writeRaw(inv.Stdout, raw, format)
	}
	opts := tableOptions{single: single, wide: format == outputWide, across: target.across, now: inv.Now()}
	t, err := res.table(raw, opts)
	if err != nil {
		return fmt.Errorf("reading the hub's answer: %w", err)
	}
	if len(t.rows) == 0 {
		fmt.Fprintf(inv.Stderr, "No %s found%s.\n", res.plural, target.where())
		return nil
	}
	return t.write(inv.Stdout)
}

// fetch reads what target names, as JSON, and says whether it is one
// object rather than a list; warnings go to stderr.
func (r getResource) fetch(ctx context.Context, c *hubClients, t getTarget, stderr io.Writer) ([]byte, bool, error) {
	if r.scope == filtered {
		raw, err := templatesList(ctx, c, t, stderr)
		return raw, false, err
	}
	raw, err := getRaw(ctx, r.client(c), cmp.Or(r.namespace, t.namespace), r.resource, t.name)
	return raw, t.name != "", err
}

// parseGetArgs checks "RESOURCE [NAME]".
func parseGetArgs(inv *invocation, args []string) (getResource, string, error) {
	if len(args) == 0 {
		return getResource{}, "", inv.usagef("missing the resource type; supported: %s", getResourceNames())
	}
	res, ok := findGetResource(args[0])
	if !ok {
		return getResource{}, "", inv.usagef("unknown resource type %q; supported: %s", args[0], getResourceNames())
	}
	switch len(args) {
	case 1:
		return res, "", nil
	case 2:
		if err := checkName(inv, args[1]); err != nil {
			return getResource{}, "", err
		}
		return res, args[1], nil
	}
	return getResource{}, "", inv.usagef("too many arguments %q: give one resource type and at most one name", args)
}

func getResourceNames() string {
	var names []string
	for _, r := range getResources {
		names = append(names, r.plural)
	}
	return strings.Join(names, ", ")
}
