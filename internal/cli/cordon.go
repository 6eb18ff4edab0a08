package cli

import (
	"context"
	"fmt"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/spf13/pflag"
)

func cordonCommand() *command {
	return &command{
		name:  "cordon",
		usage: "cordon NAME",
		short: "Mark a cluster unschedulable",
		long: `Mark a cluster unschedulable: set spec.unschedulable, for which the hub adds
the taint cluster.flotilla.io/unschedulable:NoSchedule. Workloads already on
the cluster stay; new placements avoid it.

The change is an Update of the Cluster through the hub's Kubernetes API
(RBAC: update on clusters.flotilla.io; ClusterRole flotilla-operator grants
it), retried on the fresh version when the Cluster changed meanwhile.`,
		example: `  flotilla cordon edge-1
`,
		bind: func(*pflag.FlagSet) runFunc { return setUnschedulable(true) },
	}
}

func uncordonCommand() *command {
	return &command{
		name:  "uncordon",
		usage: "uncordon NAME",
		short: "Mark a cluster schedulable again",
		long: `Mark a cluster schedulable again: clear spec.unschedulable, for which the hub
removes the taint cluster.flotilla.io/unschedulable. Like cordon, an Update of
the Cluster through the hub's Kubernetes API.`,
		example: `  flotilla uncordon edge-1
`,
		bind: func(*pflag.FlagSet) runFunc { return setUnschedulable(false) },
	}
}

// setUnschedulable returns the run function of cordon (true) or uncordon
// (false).
func setUnschedulable(want bool) runFunc {
	return func(ctx context.Context, inv *invocation, args []string) error {
		if len(args) != 1 {
			return inv.usagef("expected exactly one cluster name, got %d arguments %q", len(args), args)
		}
		name := args[0]
		if err := checkName(inv, name); err != nil {
			return err
		}
		c, err := inv.clients()
		if err != nil {
			return err
		}
		changed, err := c.updateCluster(ctx, name, func(cl *v1alpha1.Cluster) (bool, error) {
			if cl.Spec.Unschedulable == want {
				return false, nil
			}
			cl.Spec.Unschedulable = want
			return true, nil
		})
		if err != nil {
			return err
		}
		verb := "cordoned"
		if !want {
			verb = "uncordoned"
		}
		if !changed {
			verb = "already " + verb
		}
		fmt.Fprintf(inv.Stdout, "cluster/%s %s\n", name, verb)
		return nil
	}
}
