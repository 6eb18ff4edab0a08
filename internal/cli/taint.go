package cli

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/spf13/pflag"
)

func taintCommand() *command {
	return &command{
		name:  "taint",
		usage: "taint cluster NAME TAINT... [--overwrite]",
		short: "Add or remove taints on a cluster",
		long: `Add or remove taints on a cluster, in kubectl's syntax. Bindings that do not
tolerate a taint are not scheduled to the cluster (NoSchedule, or
PreferNoSchedule as a preference) or are evicted from it (NoExecute; with
PreferNoExecute only when a Ready cluster with room can take them).

Each TAINT is one of:
  key=value:Effect   add the taint (key:Effect adds it without a value)
  key:Effect-        remove the taint with this key and effect
  key-               remove every taint with this key
Effect is NoSchedule, PreferNoSchedule, NoExecute or PreferNoExecute. The
key is a qualified name (an optional DNS-subdomain prefix and '/', then up
to 63 characters); the value follows the rules of label values.

Adding a key and effect the cluster already has with another value needs
--overwrite; adding one it has with the same value changes nothing; removing
one it does not have is an error. The hub stamps timeAdded on new taints.
Use cordon and uncordon for the unschedulable taint. The hub's own taints
(cluster.flotilla.io/not-ready, unreachable and terminating, also spelt
cluster.karmada.io/...) are refused, to add or to remove: the hub sets and
clears them itself, from the cluster's health and deletion.

The change is an Update of the Cluster's spec.taints through the hub's
Kubernetes API (RBAC: update on clusters.flotilla.io; ClusterRole
flotilla-operator grants it), made on the version just read: when the hub
or someone else changed the Cluster in between, flotilla reads it again and
re-applies the change, up to 5 times.`,
		example: `  # Keep new workloads off edge-1 while the site is under maintenance
  flotilla taint cluster edge-1 maintenance=planned:NoSchedule

  # Change the value of that taint
  flotilla taint cluster edge-1 maintenance=extended:NoSchedule --overwrite

  # Remove it again: by key and effect, or every taint with the key
  flotilla taint cluster edge-1 maintenance:NoSchedule-
  flotilla taint cluster edge-1 maintenance-
`,
		bind: bindTaint,
	}
}

type taintOptions struct {
	overwrite bool
}

func bindTaint(fs *pflag.FlagSet) runFunc {
	o := &taintOptions{}
	fs.BoolVar(&o.overwrite, "overwrite", false, "replace the value of a taint the cluster has with the same key and effect")
	return o.run
}

func (o *taintOptions) run(ctx context.Context, inv *invocation, args []string) error {
	name, rest, err := parseClusterTarget(inv, args)
	if err != nil {
		return err
	}
	changes, err := parseTaintArgs(rest)
	if err != nil {
		return inv.usagef("%v", err)
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	var result taintResult
	_, err = c.updateCluster(ctx, name, func(cl *v1alpha1.Cluster) (bool, error) {
		r, err := applyTaints(name, cl.Spec.Taints, changes, o.overwrite)
		if err != nil {
			return false, err
		}
		result = r
		cl.Spec.Taints = r.taints
		return r.added || r.removed, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(inv.Stdout, "cluster/%s %s\n", name, result.verb())
	return nil
}
