package cli

import (
	"context"
	"net/url"

	"github.com/spf13/pflag"
)

func applyCommand() *command {
	return &command{
		name:  "apply",
		usage: "apply -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R] [--dry-run]",
		short: "Create or update resource templates and propagation policies",
		long: `Create or update objects on the hub from YAML or JSON files: resource
templates (any Kubernetes object: Deployment, Service, ConfigMap, CRD, ...)
and the PropagationPolicies and ClusterPropagationPolicies that say where they
run. Policies of policy.karmada.io/v1alpha1 are accepted as they are.

A file holds one or more YAML documents separated by "---" lines, or JSON
objects; a List (or a typed list such as PropagationPolicyList) stands for its
items. A directory stands for its .yaml, .yml and .json files in name order
(with -R, those of its subdirectories too). "-f -" reads standard input.

Every document is checked before anything is sent: it must be an object with
apiVersion, kind and metadata.name. Then all objects go to the hub in one
request, and the hub applies all of them or none: every problem, found here
or by the hub, is listed with its file, document and field, and nothing is
applied. Applying replaces an object's labels, annotations and spec; the
status the hub keeps is not touched.

Each object is reported as created, configured (changed) or unchanged.`,
		example: `  # A Deployment and the policy that propagates it
  flotilla apply -f nginx.yaml -f nginx-policy.yaml

  # Every manifest under a directory tree, in namespace shop unless they name one
  flotilla apply -R -f manifests/ -n shop

  # What would change, without storing anything
  flotilla apply -f manifests/ --dry-run

  # From standard input
  kustomize build overlays/prod | flotilla apply -f -
`,
		bind: bindApply,
	}
}

type applyOptions struct {
	manifestOptions
	dryRun bool
}

func bindApply(fs *pflag.FlagSet) runFunc {
	o := &applyOptions{}
	o.manifestOptions.bind(fs, "apply")
	fs.BoolVar(&o.dryRun, "dry-run", false, "have the hub check everything and say what it would do, without storing anything")
	return o.run
}

func (o *applyOptions) run(ctx context.Context, inv *invocation, args []string) error {
	manifests, err := o.load(inv, args)
	if err != nil {
		return err
	}
	query := url.Values{}
	if o.namespace != "" {
		query.Set("namespace", o.namespace)
	}
	suffix := ""
	if o.dryRun {
		query.Set("dryRun", "true")
		suffix = " (dry run)"
	}
	actions, err := inv.client().sendManifests(ctx, applyPath, query, manifests)
	if err != nil {
		return explainRejection(err, manifests, "nothing was applied")
	}
	return writeActions(inv.Stdout, actions, suffix)
}
