package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
)

// Defaults of rebalance.
const (
	defaultRebalanceTTL     = 5 * time.Minute
	defaultRebalanceTimeout = 2 * time.Minute
	// minWaitedTTL keeps a rebalancer whose result flotilla waits for long
	// enough to be read: the hub counts the TTL from a finish time
	// truncated to the second.
	minWaitedTTL = 10 * time.Second
	// rebalancePoll is how often flotilla asks whether the rebalancer
	// finished.
	rebalancePoll = 250 * time.Millisecond
)

func rebalanceCommand() *command {
	return &command{
		name:  "rebalance",
		usage: "rebalance KIND/NAME [KIND/NAME...] [-n NAMESPACE] [--name NAME] [--ttl DURATION] [--no-wait] [--timeout DURATION]",
		short: "Reschedule workloads from scratch (a WorkloadRebalancer)",
		long: `Reschedule workloads from scratch: create a WorkloadRebalancer
(apps.flotilla.io/v1alpha1) naming them, wait until the hub has acted on every
one, and print the result of each.

The scheduler normally keeps a workload where it runs and only adds or removes
replicas (Steady). A rebalance asks for a Fresh schedule instead: the hub sets
spec.rescheduleTriggeredAt on each workload's binding, and the scheduler places
its replicas anew under the binding's current placement, as if none ran yet.
Use it when replicas crowd on some clusters after a failover, a cordon or a
shortage that is over. Workloads divided by dynamic weight or Aggregated move;
static weights and Duplicated give the same result again.

The WorkloadRebalancer is created through the hub's Kubernetes API (RBAC:
create on workloadrebalancers.apps.flotilla.io; ClusterRole flotilla-operator
grants it), and flotilla reads it back until the hub wrote its status.

A workload is Successful once its binding asks for the Fresh schedule, and
Failed with reason ReferencedBindingNotFound when it has no binding (no such
resource template, or no policy propagates it). flotilla exits with 1 when any
workload failed.

Kinds: deployment (deploy), statefulset (sts), daemonset (ds), replicaset (rs),
job, cronjob (cj), pod (po), service (svc), configmap (cm), secret,
serviceaccount (sa), persistentvolumeclaim (pvc), ingress (ing), role,
rolebinding, horizontalpodautoscaler (hpa), poddisruptionbudget (pdb), and the
cluster-scoped namespace (ns), clusterrole, clusterrolebinding,
customresourcedefinition (crd), persistentvolume (pv), storageclass (sc),
priorityclass (pc); plurals and KIND.GROUP (deployment.apps) work too. Other
kinds are written Kind.version.group (Widget.v1.example.com) and are taken as
namespaced. Namespaced workloads are in the kubeconfig context's namespace
(default) unless -n names another.

The WorkloadRebalancer is named rebalance-<UTC time> unless --name says
otherwise, and the hub deletes it --ttl after it finished (its
ttlSecondsAfterFinished). 'flotilla get workloadrebalancers' and 'flotilla
describe workloadrebalancer NAME' show it until then.`,
		example: `  # Spread nginx of namespace web again after member-2 came back
  flotilla rebalance deployment/nginx -n web

  # Several workloads at once, kept for an hour, without waiting
  flotilla rebalance deployment/api statefulset/db -n shop --ttl 1h --no-wait

  # A custom kind
  flotilla rebalance Widget.v1.example.com/w1 -n lab
`,
		bind: bindRebalance,
	}
}

type rebalanceOptions struct {
	namespace string
	name      string
	ttl       time.Duration
	noWait    bool
	timeout   time.Duration
}

func bindRebalance(fs *pflag.FlagSet) runFunc {
	o := &rebalanceOptions{}
	fs.StringVarP(&o.namespace, "namespace", "n", "", "`NAMESPACE` of namespaced workloads (default the kubeconfig context's, or default)")
	fs.StringVar(&o.name, "name", "", "`NAME` of the WorkloadRebalancer (default rebalance-<UTC time>)")
	fs.DurationVar(&o.ttl, "ttl", defaultRebalanceTTL, "delete the WorkloadRebalancer this `DURATION` after it finished, rounded up to whole seconds; 0 keeps it")
	fs.BoolVar(&o.noWait, "no-wait", false, "create the WorkloadRebalancer and return without waiting for its result")
	fs.DurationVar(&o.timeout, "timeout", defaultRebalanceTimeout, "how long to wait for the result, as a `DURATION` (0 waits as long as it takes)")
	return o.run
}

func (o *rebalanceOptions) run(ctx context.Context, inv *invocation, args []string) error {
	rb, err := o.rebalancer(inv, args)
	if err != nil {
		return err
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	created, err := createRebalancer(ctx, c, rb, o.name == "")
	if err != nil {
		return err
	}
	fmt.Fprintf(inv.Stdout, "workloadrebalancer.%s/%s created\n", appsv1alpha1.GroupName, created.Name)
	if o.noWait {
		return nil
	}
	done, err := waitRebalancer(ctx, c, created.Name, o.timeout)
	if err != nil {
		return err
	}
	t := rebalanceResultTable(done)
	if err := t.write(inv.Stdout); err != nil {
		return err
	}
	return failedWorkloads(done)
}

// rebalancer checks the command line and returns the object to create.
func (o *rebalanceOptions) rebalancer(inv *invocation, args []string) (*appsv1alpha1.WorkloadRebalancer, error) {
	if len(args) == 0 {
		return nil, inv.usagef("name at least one workload as KIND/NAME, such as deployment/nginx")
	}
	if o.namespace != "" {
		if err := checkNamespace(inv, o.namespace); err != nil {
			return nil, err
		}
	}
	if o.name != "" {
		if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
			return nil, inv.usagef("invalid --name %q: %s", o.name, strings.Join(errs, "; "))
		}
	}
	if o.timeout < 0 {
		return nil, inv.usagef("invalid --timeout %s: must not be negative", o.timeout)
	}
	ttl, err := o.ttlSeconds(inv)
	if err != nil {
		return nil, err
	}
	rb := &appsv1alpha1.WorkloadRebalancer{TypeMeta: appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancer),
		ObjectMeta: metav1.ObjectMeta{Name: cmp.Or(o.name, "rebalance-"+inv.Now().UTC().Format("20060102-150405"))},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: ttl}}
	seen := map[appsv1alpha1.ObjectReference]bool{}
	var namespaced []int // indexes of the namespaced workloads
	for _, arg := range args {
		w, inNamespace, err := parseWorkload(inv, arg)
		if err != nil {
			return nil, err
		}
		if seen[w] {
			return nil, inv.usagef("%s is named twice", arg)
		}
		seen[w] = true
		if inNamespace {
			namespaced = append(namespaced, len(rb.Spec.Workloads))
		}
		rb.Spec.Workloads = append(rb.Spec.Workloads, w)
	}
	if len(namespaced) > 0 {
		ns := o.namespace
		if ns == "" {
			if ns, err = inv.defaultNamespace(); err != nil {
				return nil, err
			}
		}
		for _, i := range namespaced {
			rb.Spec.Workloads[i].Namespace = ns
		}
	}
	return rb, nil
}

// ttlSeconds is --ttl as ttlSecondsAfterFinished: nil for 0 (kept).
func (o *rebalanceOptions) ttlSeconds(inv *invocation) (*int32, error) {
	switch {
	case o.ttl < 0:
		return nil, inv.usagef("invalid --ttl %s: must not be negative (0 keeps the WorkloadRebalancer)", o.ttl)
	case o.ttl == 0:
		return nil, nil
	case o.ttl > math.MaxInt32*time.Second:
		return nil, inv.usagef("invalid --ttl %s: at most %s", o.ttl, time.Duration(math.MaxInt32)*time.Second)
	case !o.noWait && o.ttl < minWaitedTTL:
		return nil, inv.usagef("--ttl %s could delete the WorkloadRebalancer before its result is read: give at least %s, 0 to keep it, or --no-wait",
			o.ttl, minWaitedTTL)
	}
	s := int32((o.ttl + time.Second - 1) / time.Second)
	return &s, nil
}

// workloadKind is a kind rebalance knows by a short name.
type workloadKind struct {
	names         []string // lower case: singular, plural, short names
	apiVersion    string
	kind          string
	clusterScoped bool
}

// workloadKinds are the built-in kinds worth naming briefly; every other
// kind is written Kind.version.group.
var workloadKinds = []workloadKind{
	{names: []string{"deployment", "deployments", "deploy"}, apiVersion: "apps/v1", kind: "Deployment"},
	{names: []string{"statefulset", "statefulsets", "sts"}, apiVersion: "apps/v1", kind: "StatefulSet"},
	{names: []string{"daemonset", "daemonsets", "ds"}, apiVersion: "apps/v1", kind: "DaemonSet"},
	{names: []string{"replicaset", "replicasets", "rs"}, apiVersion: "apps/v1", kind: "ReplicaSet"},
	{names: []string{"job", "jobs"}, apiVersion: "batch/v1", kind: "Job"},
	{names: []string{"cronjob", "cronjobs", "cj"}, apiVersion: "batch/v1", kind: "CronJob"},
	{names: []string{"pod", "pods", "po"}, apiVersion: "v1", kind: "Pod"},
	{names: []string{"service", "services", "svc"}, apiVersion: "v1", kind: "Service"},
	{names: []string{"configmap", "configmaps", "cm"}, apiVersion: "v1", kind: "ConfigMap"},
	{names: []string{"secret", "secrets"}, apiVersion: "v1", kind: "Secret"},
	{names: []string{"serviceaccount", "serviceaccounts", "sa"}, apiVersion: "v1", kind: "ServiceAccount"},
	{names: []string{"persistentvolumeclaim", "persistentvolumeclaims", "pvc"}, apiVersion: "v1", kind: "PersistentVolumeClaim"},
	{names: []string{"ingress", "ingresses", "ing"}, apiVersion: "networking.k8s.io/v1", kind: "Ingress"},
	{names: []string{"role", "roles"}, apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role"},
	{names: []string{"rolebinding", "rolebindings"}, apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding"},
	{names: []string{"horizontalpodautoscaler", "horizontalpodautoscalers", "hpa"}, apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler"},
	{names: []string{"poddisruptionbudget", "poddisruptionbudgets", "pdb"}, apiVersion: "policy/v1", kind: "PodDisruptionBudget"},
	{names: []string{"namespace", "namespaces", "ns"}, apiVersion: "v1", kind: "Namespace", clusterScoped: true},
	{names: []string{"clusterrole", "clusterroles"}, apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", clusterScoped: true},
	{names: []string{"clusterrolebinding", "clusterrolebindings"}, apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", clusterScoped: true},
	{names: []string{"customresourcedefinition", "customresourcedefinitions", "crd", "crds"}, apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", clusterScoped: true},
	{names: []string{"persistentvolume", "persistentvolumes", "pv"}, apiVersion: "v1", kind: "PersistentVolume", clusterScoped: true},
	{names: []string{"storageclass", "storageclasses", "sc"}, apiVersion: "storage.k8s.io/v1", kind: "StorageClass", clusterScoped: true},
	{names: []string{"priorityclass", "priorityclasses", "pc"}, apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", clusterScoped: true},
}

// lookupKind finds a kind by a short name, or by RESOURCE.GROUP
// ("deployment.apps").
func lookupKind(name string) (workloadKind, bool) {
	name = strings.ToLower(name)
	for _, k := range workloadKinds {
		group := schema.FromAPIVersionAndKind(k.apiVersion, k.kind).Group
		for _, n := range k.names {
			if n == name || (group != "" && n+"."+group == name) {
				return k, true
			}
		}
	}
	return workloadKind{}, false
}

func knownKindNames() string {
	names := make([]string, len(workloadKinds))
	for i, k := range workloadKinds {
		names[i] = k.names[0]
	}
	return strings.Join(names, ", ")
}

// fullKind is Kind.version.group (the group may be missing for the core
// group, as in Foo.v1).
var (
	fullKind    = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*)\.(v[0-9]+(?:(?:alpha|beta)[0-9]+)?)(?:\.([a-z0-9.-]+))?$`)
	kindVersion = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*\.v[0-9]`)
)

// parseWorkload turns KIND/NAME into a workload reference without a
// namespace, and says whether the kind is namespaced.
func parseWorkload(inv *invocation, arg string) (appsv1alpha1.ObjectReference, bool, error) {
	kindName, name, ok := strings.Cut(arg, "/")
	if !ok || kindName == "" || name == "" || strings.Contains(name, "/") {
		return appsv1alpha1.ObjectReference{}, false, inv.usagef("invalid workload %q: expected KIND/NAME, such as deployment/nginx", arg)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return appsv1alpha1.ObjectReference{}, false, inv.usagef("invalid workload %q: name %q: %s", arg, name, strings.Join(errs, "; "))
	}
	if k, ok := lookupKind(kindName); ok {
		return appsv1alpha1.ObjectReference{APIVersion: k.apiVersion, Kind: k.kind, Name: name}, !k.clusterScoped, nil
	}
	m := fullKind.FindStringSubmatch(kindName)
	switch {
	case m != nil:
		apiVersion := m[2]
		if m[3] != "" {
			apiVersion = m[3] + "/" + m[2]
		}
		return appsv1alpha1.ObjectReference{APIVersion: apiVersion, Kind: m[1], Name: name}, true, nil
	case kindVersion.MatchString(kindName):
		return appsv1alpha1.ObjectReference{}, false, inv.usagef("invalid kind %q: write Kind.version.group with the Kind as the template spells it, such as Widget.v1.example.com", kindName)
	}
	return appsv1alpha1.ObjectReference{}, false, inv.usagef("unknown kind %q; known: %s; other kinds as Kind.version.group, such as Widget.v1.example.com",
		kindName, knownKindNames())
}

// createRebalancer creates rb; a generated name that is taken gets a
// suffix (-2, -3, ...), a chosen one is an error.
func createRebalancer(ctx context.Context, c *hubClients, rb *appsv1alpha1.WorkloadRebalancer, generated bool) (*appsv1alpha1.WorkloadRebalancer, error) {
	rebalancers := c.flotilla.AppsV1alpha1().WorkloadRebalancers()
	base := rb.Name
	for attempt := 1; ; attempt++ {
		created, err := rebalancers.Create(ctx, rb, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) && generated && attempt < 5 {
			rb.Name = fmt.Sprintf("%s-%d", base, attempt+1)
			continue
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("workloadrebalancer %q already exists: pick another --name, or delete it first", rb.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("creating workloadrebalancer %q: %w", rb.Name, err)
		}
		return created, nil
	}
}

// waitRebalancer polls the rebalancer until it finished, for at most
// timeout (0: no limit).
func waitRebalancer(ctx context.Context, c *hubClients, name string, timeout time.Duration) (*appsv1alpha1.WorkloadRebalancer, error) {
	rebalancers := c.flotilla.AppsV1alpha1().WorkloadRebalancers()
	var done *appsv1alpha1.WorkloadRebalancer
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		rb, err := rebalancers.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("workloadrebalancer %q was deleted before it finished", name)
		case err != nil:
			return false, err
		case rb.Finished():
			done = rb
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, errWaitTimedOut) {
		return nil, fmt.Errorf("workloadrebalancer %q did not finish within %s (is the hub running its controllers?); "+
			"it stays on the hub: 'flotilla describe workloadrebalancer %s' shows how far it got", name, timeout, name)
	}
	return done, err
}

// errWaitTimedOut ends a poll that ran out of time.
var errWaitTimedOut = errors.New("timed out")

// poll calls check at once, then every rebalancePoll, until it is done or
// fails, for at most timeout (0: no limit); it returns errWaitTimedOut
// when the time is up. A request cut short by the deadline is not a
// failure, only the end of the wait.
func poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) (bool, error)) error {
	waitCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ticker := time.NewTicker(rebalancePoll)
	defer ticker.Stop()
	for {
		done, err := check(waitCtx)
		switch {
		case err != nil && waitCtx.Err() == nil:
			return err
		case err == nil && done:
			return nil
		}
		select {
		case <-waitCtx.Done():
			if errors.Is(waitCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				return errWaitTimedOut
			}
			return waitCtx.Err()
		case <-ticker.C:
		}
	}
}

// rebalanceResultTable lists the result of each workload.
func rebalanceResultTable(rb *appsv1alpha1.WorkloadRebalancer) *table {
	t := &table{header: []string{"NAMESPACE", "WORKLOAD", "RESULT", "REASON"}}
	for _, o := range rb.Status.ObservedWorkloads {
		t.add(orNone(o.Workload.Namespace), workloadText(o.Workload), orNone(string(o.Result)), orNone(string(o.Reason)))
	}
	return t
}

// workloadText names a workload the way kubectl does: deployment.apps/nginx,
// configmap/settings, widget.example.com/w1.
func workloadText(w appsv1alpha1.ObjectReference) string {
	gvk := schema.FromAPIVersionAndKind(w.APIVersion, w.Kind)
	kind := strings.ToLower(w.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + w.Name
}

// failedWorkloads is an error naming the workloads that failed, if any.
func failedWorkloads(rb *appsv1alpha1.WorkloadRebalancer) error {
	var failed []string
	for _, o := range rb.Status.ObservedWorkloads {
		if o.Result != appsv1alpha1.RebalanceFailed {
			continue
		}
		where := ""
		if o.Workload.Namespace != "" {
			where = " in namespace " + o.Workload.Namespace
		}
		why := string(o.Reason)
		if o.Reason == appsv1alpha1.RebalanceObjectNotFound {
			why += " (no such template, or no policy propagates it)"
		}
		failed = append(failed, workloadText(o.Workload)+where+": "+why)
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d workloads failed: %s", len(failed), len(rb.Status.ObservedWorkloads), strings.Join(failed, "; "))
}
