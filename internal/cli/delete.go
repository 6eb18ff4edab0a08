package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func deleteCommand() *command {
	return &command{
		name:  "delete",
		usage: "delete -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R]",
		short: "Delete resource templates and propagation policies",
		long: `Delete the objects the files describe from the hub: resource templates,
PropagationPolicies and ClusterPropagationPolicies, WorkloadRebalancers
(Karmada's documents too). The files are read and checked as by apply (only
apiVersion, kind, namespace and name matter; a document that names no
namespace is in -n, else in the kubeconfig context's namespace); if any
document has a problem, nothing is deleted. Then each object is deleted
through the hub's Kubernetes API (RBAC: delete on its kind), one by one:
namespaced objects first, then CustomResourceDefinitions, then Namespaces.

Deleting a template deletes its binding, and the agents then delete its
objects from the member clusters. The hub runs no namespace controller: a
Namespace deleted there stays Terminating (delete what is in it first).

Each object is reported as deleted or not found (a kind the hub does not
serve has no objects). Any object not found makes flotilla exit with status
1, after the others were deleted: the files did not match what the hub had.`,
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
	gvks, problems := convertAll(manifests)
	if len(problems) > 0 {
		return &problemsError{
			summary:  fmt.Sprintf("%s in the input; nothing was sent to the hub", countNoun(len(problems), "problem")),
			problems: problems,
		}
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	ns := o.namespace
	if ns == "" {
		if ns, err = inv.defaultNamespace(); err != nil {
			return err
		}
	}
	r := newResolver(c, ns, manifests, gvks)
	r.unservedIsMissing = true
	objects := make([]*object, len(manifests))
	actions := make([]string, len(manifests))
	for i, m := range manifests {
		obj, p, err := r.object(m, gvks[i])
		if err != nil {
			return err
		}
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		objects[i] = obj
		if obj.mapping == nil { // a kind the hub does not serve has no objects
			actions[i] = actionNotFound
		}
	}
	if len(problems) > 0 {
		return &problemsError{
			summary:  fmt.Sprintf("%s in the input; nothing was deleted", countNoun(len(problems), "problem")),
			problems: problems,
		}
	}
	failures, fatal := deleteAll(ctx, c, objects, actions)
	if err := writeActions(inv.Stdout, objects, actions); err != nil {
		return err
	}
	switch {
	case fatal != nil:
		return fmt.Errorf("deleting stopped; the objects listed were deleted, the others not: %w", fatal)
	case len(failures) > 0:
		return &problemsError{
			summary:  fmt.Sprintf("%d of %s not deleted", len(failures), countNoun(len(objects), "object")),
			problems: failures,
		}
	}
	missing := 0
	for _, a := range actions {
		if a == actionNotFound {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %s not found on the hub", missing, countNoun(len(actions), "object"))
	}
	return nil
}

// deleteAll deletes every object not yet known to be missing: namespaced
// ones first, then CRDs, then Namespaces, so nothing is deleted before
// what lives in it.
func deleteAll(ctx context.Context, c *hubClients, objects []*object, actions []string) (failures []problem, fatal error) {
	rank := func(o *object) int {
		switch o.gvk.GroupKind() {
		case namespaceKind:
			return 2
		case crdKind:
			return 1
		}
		return 0
	}
	order := make([]int, len(objects))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rank(objects[a]) - rank(objects[b]) })
	background := metav1.DeletePropagationBackground
	for _, i := range order {
		obj := objects[i]
		if actions[i] != "" {
			continue
		}
		err := obj.resource(c).Delete(ctx, obj.body.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		switch {
		case err == nil:
			actions[i] = actionDeleted
		case apierrors.IsNotFound(err):
			actions[i] = actionNotFound
		default:
			ps, ok := answerProblems(obj.m.where(), err)
			if !ok {
				return failures, err
			}
			failures = append(failures, ps...)
		}
	}
	return failures, nil
}
