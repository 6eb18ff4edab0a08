package cli

import (
	"context"
	"fmt"
	"net/url"

	"github.com/spf13/pflag"
)

// actionNotFound is the hub's action for an item it did not have.
const actionNotFound = "not found"

func deleteCommand() *command {
	return &command{
		name:  "delete",
		usage: "delete -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R]",
		short: "Delete resource templates and propagation policies",
		long: `Delete the objects the files describe from the hub: resource templates,
PropagationPolicies and ClusterPropagationPolicies. The files are read and
checked as by apply (only apiVersion, kind, namespace and name matter); all
objects are deleted in one request, all or none.

Deleting a template deletes its binding, and the agents then delete its
objects from the member clusters.

Each object is reported as deleted or not found. Any object not found makes
flotilla exit with status 1, after the others were deleted: the files did not
match what the hub had.`,
		example: `  # Delete what a file applied
  flotilla delete -f nginx.yaml

  # Everything under a directory tree
  flotilla delete -R -f manifests/
`,
		bind: bindDelete,
	}
}

func bindDelete(fs *pflag.FlagSet) runFunc {
	o := &manifestOptions{}
	o.bind(fs, "delete")
	return o.runDelete
}

func (o *manifestOptions) runDelete(ctx context.Context, inv *invocation, args []string) error {
	manifests, err := o.load(inv, args)
	if err != nil {
		return err
	}
	query := url.Values{}
	if o.namespace != "" {
		query.Set("namespace", o.namespace)
	}
	actions, err := inv.client().sendManifests(ctx, deletePath, query, manifests)
	if err != nil {
		return explainRejection(err, manifests, "nothing was deleted")
	}
	if err := writeActions(inv.Stdout, actions, ""); err != nil {
		return err
	}
	missing := 0
	for _, a := range actions {
		if a.Action == actionNotFound {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %s not found on the hub", missing, countNoun(len(actions), "object"))
	}
	return nil
}
