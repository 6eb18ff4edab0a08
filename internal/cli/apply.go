package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/pflag"
)

func applyCommand() *command {
	return &command{
		name:  "apply",
		usage: "apply -f FILE|DIR|- [-f ...] [-n NAMESPACE] [-R] [--dry-run]",
		short: "Create or update resource templates and propagation policies",
		long: `Create or update objects on the hub from YAML or JSON files: resource
templates (any Kubernetes object: Deployment, Service, ConfigMap, CRD, ...),
the PropagationPolicies and ClusterPropagationPolicies that say where they
run, WorkloadRebalancers and ClusterTaintPolicies. Karmada's documents are
accepted as they are:
policy.karmada.io/v1alpha1 policies are applied as flotilla.io/v1alpha1 ones,
and apps.karmada.io/v1alpha1 WorkloadRebalancers as apps.flotilla.io/v1alpha1
ones (the field names are the same).

A file holds one or more YAML documents separated by "---" lines, or JSON
objects; a List (or a typed list such as PropagationPolicyList) stands for its
items. A directory stands for its .yaml, .yml and .json files in name order
(with -R, those of its subdirectories too). "-f -" reads standard input.

Everything goes through the hub's Kubernetes API, in three steps:
 1. Every document is checked here first: it must be an object with
    apiVersion, kind and metadata.name, of a kind the hub serves (found
    through discovery), in a namespace that exists on the hub or that the
    input creates. Namespaced objects go to the namespace the document names,
    else -n, else the kubeconfig context's (default).
 2. The hub checks every object with a server-side dry run (validation,
    admission, field ownership): nothing is stored.
 3. Only when every object passed both are they applied, one by one, with
    server-side apply (field manager "flotilla"; conflicts with fields other
    managers own are not forced, but reported for that object).
Every problem is listed with its file, document and field. So a file with an
invalid document changes nothing, as far as the API allows: the hub has no
transaction across objects, so an object refused in step 3 (another writer
got in between) leaves the others applied; and objects whose namespace or
CustomResourceDefinition the same input creates cannot be dry-run before
those exist (Namespaces and CRDs are applied first, then the rest).

Applying sets the fields the documents name and takes ownership of them; the
status the hub keeps is not touched (a document's status is left out).
Each object is reported as created, configured (changed) or unchanged.
RBAC: get, patch and, for new objects, create on each kind; ClusterRole
flotilla-operator grants them for policies, rebalancers and templates of the
common groups.`,
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
	fs.BoolVar(&o.dryRun, "dry-run", false, "have the hub check everything (a server-side dry run) and say what it would do, without storing anything")
	return o.run
}

func (o *applyOptions) run(ctx context.Context, inv *invocation, args []string) error {
	objects, c, err := o.resolve(ctx, inv, args, "applied")
	if err != nil {
		return err
	}
	actions, err := dryRun(ctx, c, objects)
	if err != nil {
		return err
	}
	if o.dryRun {
		for i, obj := range objects {
			actions[i] += " (dry run"
			if obj.unchecked != "" {
				actions[i] += "; not checked by the hub: " + obj.unchecked
			}
			actions[i] += ")"
		}
		return writeActions(inv.Stdout, objects, actions)
	}
	failures, fatal := applyAll(ctx, c, objects, actions)
	if err := writeActions(inv.Stdout, objects, actions); err != nil {
		return err
	}
	if fatal != nil {
		return fmt.Errorf("applying stopped; the objects listed were applied, the others not: %w", fatal)
	}
	if len(failures) > 0 {
		return &problemsError{
			summary:  fmt.Sprintf("%d of %s not applied", len(failures), countNoun(len(objects), "object")),
			problems: failures,
		}
	}
	return nil
}

// resolve reads and checks the files (nothing is sent while any document
// has a problem), then finds every object's kind and namespace on the hub.
// done says what would have happened to the objects: "applied", "deleted".
func (o *manifestOptions) resolve(ctx context.Context, inv *invocation, args []string, done string) ([]*object, *hubClients, error) {
	manifests, err := o.load(inv, args)
	if err != nil {
		return nil, nil, err
	}
	gvks, problems := convertAll(manifests)
	if len(problems) > 0 {
		return nil, nil, &problemsError{
			summary:  fmt.Sprintf("%s in the input; nothing was sent to the hub", countNoun(len(problems), "problem")),
			problems: problems,
		}
	}
	c, err := inv.clients()
	if err != nil {
		return nil, nil, err
	}
	ns := o.namespace
	if ns == "" {
		if ns, err = inv.defaultNamespace(); err != nil {
			return nil, nil, err
		}
	}
	objects, problems, err := newResolver(c, ns, manifests, gvks).resolve(ctx, manifests, gvks)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		return nil, nil, hubProblems(problems, done)
	}
	return objects, c, nil
}

// hubProblems is the error of problems the hub's answers showed.
func hubProblems(problems []problem, done string) error {
	return &problemsError{
		summary:  fmt.Sprintf("the hub found %s; nothing was %s", countNoun(len(problems), "problem"), done),
		problems: problems,
	}
}

// dryRun has the hub check every object with a server-side dry run of its
// apply and returns what applying each would do. Any refusal of any object
// fails the whole run: nothing is applied. Objects the hub cannot check yet
// (their namespace or CRD is in the same input) would be created.
func dryRun(ctx context.Context, c *hubClients, objects []*object) ([]string, error) {
	actions := make([]string, len(objects))
	var problems []problem
	for i, obj := range objects {
		if obj.unchecked != "" {
			actions[i] = actionCreated
			continue
		}
		if err := obj.readBefore(ctx, c); err != nil {
			if ps, ok := answerProblems(obj.m.where(), err); ok {
				problems = append(problems, ps...)
				continue
			}
			return nil, err
		}
		after, err := obj.serverSideApply(ctx, c, true)
		if err != nil {
			ps, ok := answerProblems(obj.m.where(), err)
			if !ok {
				return nil, err
			}
			problems = append(problems, ps...)
			continue
		}
		actions[i] = obj.action(after)
	}
	if len(problems) > 0 {
		return nil, hubProblems(problems, "applied")
	}
	return actions, nil
}

// applyAll applies every object: Namespaces first, then CRDs (each waited
// for until it is served), then the others in input order. actions gets
// what was done to each; an object the hub refused gets no action and a
// failure. fatal is an error that stopped the run (the hub could not be
// reached).
func applyAll(ctx context.Context, c *hubClients, objects []*object, actions []string) (failures []problem, fatal error) {
	order := make([]int, len(objects))
	for i := range order {
		order[i] = i
	}
	rank := func(o *object) int {
		switch o.gvk.GroupKind() {
		case namespaceKind:
			return 0
		case crdKind:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(order, func(a, b int) int { return rank(objects[a]) - rank(objects[b]) })
	for i := range actions {
		actions[i] = ""
	}
	for _, i := range order {
		obj := objects[i]
		fail := func(err error) bool {
			ps, ok := answerProblems(obj.m.where(), err)
			if !ok {
				fatal = err
				return false
			}
			failures = append(failures, ps...)
			return true
		}
		if obj.mapping == nil { // its CRD was applied above
			m, err := c.mapping(obj.gvk)
			if err != nil {
				failures = append(failures, problem{where: obj.m.where(), what: fmt.Sprintf(
					"kind %s is still not served by the hub after its CustomResourceDefinition was applied: %v", kindName(obj.gvk.GroupKind()), err)})
				continue
			}
			obj.mapping = m
		}
		if obj.unchecked != "" {
			if err := obj.readBefore(ctx, c); err != nil && !fail(err) {
				return failures, fatal
			} else if err != nil {
				continue
			}
		}
		after, err := obj.serverSideApply(ctx, c, false)
		if err != nil {
			if !fail(err) {
				return failures, fatal
			}
			continue
		}
		actions[i] = obj.action(after)
		if obj.gvk.GroupKind() == crdKind {
			if err := waitEstablished(ctx, c, obj.body.GetName()); err != nil {
				failures = append(failures, problem{where: obj.m.where(), what: "applied, but " + err.Error()})
			}
		}
	}
	return failures, nil
}
