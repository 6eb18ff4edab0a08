package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/workload"
	"github.com/flotilla-io/flotilla/scheduler"
)

func planCommand() *command {
	return &command{
		name:  "plan",
		usage: "plan --policy FILE --template FILE --clusters FILE [--previous FILE] [--replicas N] [--fresh] [--what-if-fail CLUSTER] [-o table|json|yaml]",
		short: "Show where a policy would place a workload, offline",
		long: `Run the hub's scheduler on files, without a hub: where would this policy put
this template on these clusters? The same code as the hub's, so the answer is
the one the hub would give.

  --policy     a PropagationPolicy or ClusterPropagationPolicy (Karmada's
               policy.karmada.io/v1alpha1 documents too)
  --template   the resource template (a Deployment...): replicas and per-replica
               requests are read from it, and metadata.uid if it has one (as
               "kubectl get -o yaml" prints it), which decides, as on the hub,
               which way an exact tie between clusters goes
  --clusters   Cluster objects (a List, or several documents), e.g. the output
               of "flotilla get clusters -o yaml": labels, spec.provider/region/
               zone/taints and status.resourceSummary are used
  --previous   a ResourceBinding whose spec.clusters is the current placement
               (e.g. "flotilla get binding NAME -o yaml"); its eviction tasks
               and clusterAffinities group count as on the hub, and its
               spec.resource.uid when the template has no UID. Without it the
               plan starts from nothing
  --what-if-fail CLUSTER
               plan as if that cluster had failed: it is no candidate and its
               replicas must go elsewhere (repeatable)

The result is a table, or with -o json|yaml the ResourceBinding the hub would
write (spec.clusters without zero-replica clusters). With clusterAffinities,
lines after the table name the group used and why each group tried before it
was passed over; with its overflowAffinities, a TIER column and a line per
tier say how many replicas each tier took and why (the tiers before it were
full). When nothing fits, the reason goes to stderr and the exit code is 1.`,
		example: `  flotilla get clusters -o yaml > clusters.yaml
  flotilla plan --policy policy.yaml --template nginx.yaml --clusters clusters.yaml

  # Where would nginx's replicas go if member-1 failed?
  flotilla get binding nginx-deployment -n default -o yaml > binding.yaml
  flotilla plan --policy policy.yaml --template nginx.yaml --clusters clusters.yaml \
      --previous binding.yaml --what-if-fail member-1
`,
		bind: bindPlan,
	}
}

type planOptions struct {
	policy, template, clusters, previous string
	replicas                             int32
	fresh                                bool
	fail                                 []string
	output                               string
}

func bindPlan(fs *pflag.FlagSet) runFunc {
	var o planOptions
	fs.StringVar(&o.policy, "policy", "", "`FILE` with the PropagationPolicy or ClusterPropagationPolicy")
	fs.StringVar(&o.template, "template", "", "`FILE` with the resource template")
	fs.StringVar(&o.clusters, "clusters", "", "`FILE` with the Cluster objects")
	fs.StringVar(&o.previous, "previous", "", "`FILE` with a ResourceBinding whose spec.clusters is the current placement")
	fs.Int32Var(&o.replicas, "replicas", -1, "replicas to place, instead of the template's")
	fs.BoolVar(&o.fresh, "fresh", false, "divide from scratch, as a rebalance does, instead of keeping the previous placement")
	fs.StringArrayVar(&o.fail, "what-if-fail", nil, "plan as if `CLUSTER` had failed (repeatable)")
	fs.StringVarP(&o.output, "output", "o", "", "output format: table, json or yaml")
	return func(ctx context.Context, inv *invocation, args []string) error {
		return runPlan(inv, o, args)
	}
}

func runPlan(inv *invocation, o planOptions, args []string) error {
	if len(args) > 0 {
		return inv.usagef("unexpected arguments %q", args)
	}
	for flag, value := range map[string]string{"--policy": o.policy, "--template": o.template, "--clusters": o.clusters} {
		if value == "" {
			return inv.usagef("%s is required", flag)
		}
	}
	output := o.output
	if output == "table" {
		output = "" // plan names its default; get has only -o wide
	}
	format, err := parseOutput(output)
	if err != nil || format == outputWide {
		return inv.usagef("invalid --output %q: must be table, json or yaml", o.output)
	}
	in, err := loadPlanInput(inv, o)
	if err != nil {
		return err
	}
	result, err := scheduler.Schedule(in.Input)
	var unschedulable *scheduler.UnschedulableError
	if errors.As(err, &unschedulable) {
		return fmt.Errorf("unschedulable (%s): %s", unschedulable.Reason, unschedulable.Message)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.policy, err)
	}
	if format == outputTable {
		if err := writePlanTable(inv, in, result); err != nil {
			return err
		}
		return writePlanGroups(inv.Stdout, in, result)
	}
	raw, err := json.Marshal(in.binding(result))
	if err != nil {
		return err
	}
	return writeRaw(inv.Stdout, raw, format)
}

// planInput is a scheduling request read from files.
type planInput struct {
	scheduler.Input
	template *unstructured.Unstructured
	failed   []string
	previous map[string]int32
}

func loadPlanInput(inv *invocation, o planOptions) (*planInput, error) {
	spec, err := loadPolicy(inv, o.policy)
	if err != nil {
		return nil, err
	}
	template, err := loadTemplate(inv, o.template)
	if err != nil {
		return nil, err
	}
	clusters, err := loadClusters(inv, o.clusters)
	if err != nil {
		return nil, err
	}
	in := &planInput{template: template, failed: o.fail, previous: map[string]int32{}}
	if o.previous != "" {
		prev, err := loadPrevious(inv, o.previous)
		if err != nil {
			return nil, err
		}
		in.Previous, in.Evicted = prev.Spec.Clusters, prev.Spec.EvictingClusters()
		in.ObservedAffinity = prev.Status.SchedulerObservedAffinityName
		in.TemplateUID = prev.Spec.Resource.UID
		for _, tc := range in.Previous {
			in.previous[tc.Name] = tc.Replicas
		}
	}
	if !selects(spec, template) {
		fmt.Fprintf(inv.Stderr, "warning: %s does not select %s %s; planning anyway\n", o.policy, template.GetKind(), template.GetName())
	}
	in.Placement, in.Clusters = &spec.Placement, clusters
	in.Replicas, in.Requirements, in.Fresh = workload.Replicas(template), workload.Requirements(template), o.fresh
	in.Explain = true // why earlier affinity groups were passed over
	in.APIVersion, in.Kind = template.GetAPIVersion(), template.GetKind()
	if uid := template.GetUID(); uid != "" {
		in.TemplateUID = uid // the hub's binding takes it from the template
	}
	if o.replicas >= 0 {
		in.Replicas = o.replicas
	}
	return in, in.fail(inv)
}

// fail takes the --what-if-fail clusters out of the candidates and the
// previous placement, so their replicas must go elsewhere.
func (in *planInput) fail(inv *invocation) error {
	for _, name := range in.failed {
		i := slices.IndexFunc(in.Clusters, func(c *v1alpha1.Cluster) bool { return c.Name == name })
		if i < 0 {
			return inv.usagef("--what-if-fail %s: no such cluster in the --clusters file", name)
		}
		in.Clusters = slices.Delete(slices.Clone(in.Clusters), i, i+1)
		in.Previous = slices.DeleteFunc(slices.Clone(in.Previous), func(tc v1alpha1.TargetCluster) bool { return tc.Name == name })
	}
	return nil
}

// selects reports whether a selector of the policy names the template's
// apiVersion and kind (and its name, if it gives one).
func selects(spec *v1alpha1.PropagationSpec, u *unstructured.Unstructured) bool {
	for _, s := range spec.ResourceSelectors {
		if s.APIVersion == u.GetAPIVersion() && s.Kind == u.GetKind() && (s.Name == "" || s.Name == u.GetName()) {
			return true
		}
	}
	return false
}

// binding is the ResourceBinding the hub would write for this plan.
func (in *planInput) binding(result scheduler.Result) *v1alpha1.ResourceBinding {
	u := in.template
	kind := v1alpha1.KindResourceBinding
	if u.GetNamespace() == "" {
		kind = v1alpha1.KindClusterResourceBinding
	}
	var clusters []v1alpha1.TargetCluster
	for _, tc := range result.Clusters {
		if tc.Replicas > 0 || in.Replicas == 0 {
			clusters = append(clusters, tc)
		}
	}
	resource := v1alpha1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: in.TemplateUID}
	return &v1alpha1.ResourceBinding{
		TypeMeta:   v1alpha1.TypeMeta(kind),
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName() + "-" + strings.ToLower(u.GetKind()), Namespace: u.GetNamespace()},
		Spec: v1alpha1.ResourceBindingSpec{
			Resource:            resource,
			Replicas:            in.Replicas,
			ReplicaRequirements: in.Requirements,
			Placement:           in.Placement,
			Clusters:            clusters,
		},
		Status: v1alpha1.ResourceBindingStatus{SchedulerObservedAffinityName: result.AffinityName},
	}
}

// writePlanTable prints CLUSTER, REPLICAS, with overflow tiers TIER,
// and with a previous placement PREVIOUS; failed clusters are listed as
// such.
func writePlanTable(inv *invocation, in *planInput, result scheduler.Result) error {
	tbl := &table{header: []string{"CLUSTER", "REPLICAS"}}
	tierOf := map[string]string{}
	for _, t := range result.Tiers {
		for _, c := range t.Clusters {
			tierOf[c] = t.Name
		}
	}
	showTier := len(result.Tiers) > 0
	if showTier {
		tbl.header = append(tbl.header, "TIER")
	}
	showPrevious := len(in.previous) > 0
	if showPrevious {
		tbl.header = append(tbl.header, "PREVIOUS")
	}
	row := func(name, replicas string) {
		r := []string{name, replicas}
		if showTier {
			r = append(r, cmp.Or(tierOf[name], "-"))
		}
		if showPrevious {
			prev := "-"
			if n, ok := in.previous[name]; ok {
				prev = fmt.Sprint(n)
			}
			r = append(r, prev)
		}
		tbl.rows = append(tbl.rows, r)
	}
	for _, tc := range result.Clusters {
		row(tc.Name, fmt.Sprint(tc.Replicas))
	}
	for _, name := range in.failed {
		row(name, "failed")
	}
	return tbl.write(inv.Stdout)
}
