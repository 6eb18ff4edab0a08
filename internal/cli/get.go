package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

func getCommand() *command {
	return &command{
		name:  "get",
		usage: "get RESOURCE [NAME] [-o wide|json|yaml]",
		short: "List clusters or leases",
		long: `List clusters or their leases as a table, or print the hub's objects as JSON or YAML.

Resources:
  clusters   member clusters: readiness, taints, Kubernetes version, nodes
  leases     the agents' leases: when each was last renewed and whether it is
             fresh (missed at most one renewal), late, or expired`,
		example: `  # All clusters, and more columns
  flotilla get clusters
  flotilla get clusters -o wide

  # One cluster as YAML
  flotilla get cluster edge-1 -o yaml

  # Lease freshness of every cluster
  flotilla get leases
`,
		bind: bindGet,
	}
}

// getResource is a resource type "get" can show.
type getResource struct {
	plural   string
	names    []string // every accepted spelling
	listPath string
	itemPath func(name string) string
	table    func(raw []byte, single, wide bool, now time.Time) (*table, error)
}

// path is the URL path of the named object, or of the list without a name.
func (r getResource) path(name string) string {
	if name == "" {
		return r.listPath
	}
	return r.itemPath(name)
}

var getResources = []getResource{
	{
		plural: "clusters", names: []string{"clusters", "cluster"},
		listPath: clustersPath, itemPath: clusterPath, table: clustersTable,
	},
	{
		plural: "leases", names: []string{"leases", "lease"},
		listPath: leasesPath, itemPath: leasePath, table: leasesTable,
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
	output string
}

func bindGet(fs *pflag.FlagSet) runFunc {
	o := &getOptions{}
	fs.StringVarP(&o.output, "output", "o", "", "output `FORMAT`: wide, json or yaml (default a table)")
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
	raw, err := inv.client().do(ctx, http.MethodGet, res.path(name), nil, nil)
	if err != nil {
		return err
	}
	if format == outputJSON || format == outputYAML {
		return writeRaw(inv.Stdout, raw, format)
	}
	t, err := res.table(raw, name != "", format == outputWide, inv.Now())
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", inv.server, err)
	}
	if len(t.rows) == 0 {
		fmt.Fprintf(inv.Stderr, "No %s found.\n", res.plural)
		return nil
	}
	return t.write(inv.Stdout)
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

// checkName rejects an object name that cannot be a path segment of the
// hub's API, so it is never sent.
func checkName(inv *invocation, name string) error {
	if name == "" {
		return inv.usagef("invalid name %q: must not be empty", name)
	}
	if errs := content.IsPathSegmentName(name); len(errs) > 0 {
		return inv.usagef("invalid name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}
