package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// defaultPurgeTimeout is how long purge waits for the hub's answer.
const defaultPurgeTimeout = time.Minute

// Reasons of a Failed PurgeRequest, as the hub writes them.
const (
	purgeReasonBindingNotFound = "BindingNotFound"
	purgeReasonNoEvictionTask  = "NoEvictionTask"
)

func purgeCommand() *command {
	return &command{
		name:  "purge",
		usage: "purge binding|clusterbinding NAME --cluster CLUSTER [-n NAMESPACE] [--timeout DURATION]",
		short: "End an eviction task now: remove the workload's old copy from a cluster",
		long: `End a binding's graceful eviction task from CLUSTER by hand. The hub then
removes the workload's copy from that cluster (at once if the cluster's agent
is connected, else when it reconnects).

Tasks of purgeMode Never wait for this; any other task can be ended early the
same way, when you do not want to wait for the replacement to be healthy or the
grace period to run out. "flotilla describe binding" lists the tasks and what
each waits for.

flotilla creates a PurgeRequest (flotilla.io/v1alpha1, cluster-scoped) naming
the binding and the cluster through the hub's Kubernetes API (RBAC: create on
purgerequests.flotilla.io; ClusterRole flotilla-operator grants it, and the
audit log records who asked), then waits for the hub's answer in its status:
Purged, or Failed (no such binding, no eviction task from that cluster), which
makes flotilla exit with 1. The hub deletes the request 5 minutes after it
answered.`,
		example: `  flotilla purge binding nginx-deployment -n web --cluster member-1
`,
		bind: bindPurge,
	}
}

type purgeOptions struct {
	namespace, cluster string
	timeout            time.Duration
}

func bindPurge(fs *pflag.FlagSet) runFunc {
	o := &purgeOptions{}
	fs.StringVarP(&o.namespace, "namespace", "n", "", "`NAMESPACE` of a binding (else the kubeconfig context's, or default)")
	fs.StringVar(&o.cluster, "cluster", "", "the `CLUSTER` whose eviction task ends (required)")
	fs.DurationVar(&o.timeout, "timeout", defaultPurgeTimeout, "how long to wait for the hub's answer, as a `DURATION` (0 waits as long as it takes)")
	return o.run
}

func (o *purgeOptions) run(ctx context.Context, inv *invocation, args []string) error {
	kind, name, err := parseDescribeArgs(inv, args)
	if err != nil {
		return err
	}
	if o.cluster == "" {
		return inv.usagef("--cluster is required: the cluster whose eviction task ends")
	}
	if err := checkName(inv, o.cluster); err != nil {
		return err
	}
	if o.timeout < 0 {
		return inv.usagef("invalid --timeout %s: must not be negative", o.timeout)
	}
	ref := v1alpha1.BindingReference{Name: name}
	switch kind {
	case describeBinding:
		if o.namespace != "" {
			if err := checkNamespace(inv, o.namespace); err != nil {
				return err
			}
		}
		ns := o.namespace
		if ns == "" {
			if ns, err = inv.defaultNamespace(); err != nil {
				return err
			}
		}
		ref.Namespace = ns
	case describeClusterBinding:
	default:
		return inv.usagef("purge works on a binding or clusterbinding, not %q", args[0])
	}
	c, err := inv.clients()
	if err != nil {
		return err
	}
	req, err := c.flotilla.FlotillaV1alpha1().PurgeRequests().Create(ctx, &v1alpha1.PurgeRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: purgeRequestPrefix(name, o.cluster)},
		Spec:       v1alpha1.PurgeRequestSpec{Binding: ref, Cluster: o.cluster},
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("creating the purge request: %w", err)
	}
	done, err := waitPurge(ctx, c, req.Name, o.timeout)
	if err != nil {
		return err
	}
	what := strings.ToLower(args[0]) + "/" + name
	if done.Status.Result != v1alpha1.PurgeResultPurged {
		return purgeFailure(what, ref, o.cluster, &done.Status)
	}
	fmt.Fprintf(inv.Stdout, "%s: eviction task from %s ended; its copy there is being removed\n", what, o.cluster)
	return nil
}

// purgeRequestPrefix is the generateName of a PurgeRequest: purge-BINDING-
// CLUSTER-, cut so that the server's random suffix fits in a name.
func purgeRequestPrefix(binding, cluster string) string {
	const maxPrefix = 200
	prefix := "purge-" + binding + "-" + cluster
	if len(prefix) > maxPrefix {
		prefix = strings.TrimRight(prefix[:maxPrefix], ".-")
	}
	return prefix + "-"
}

// waitPurge polls the PurgeRequest until the hub answered, for at most
// timeout (0: no limit).
func waitPurge(ctx context.Context, c *hubClients, name string, timeout time.Duration) (*v1alpha1.PurgeRequest, error) {
	requests := c.flotilla.FlotillaV1alpha1().PurgeRequests()
	var done *v1alpha1.PurgeRequest
	err := poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		req, err := requests.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("purgerequest %q was deleted before the hub answered it", name)
		case err != nil:
			return false, err
		case req.Status.Result != "":
			done = req
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, errWaitTimedOut) {
		return nil, fmt.Errorf("the hub did not answer purgerequest %q within %s (is it running its controllers?); "+
			"the request stays: 'kubectl get purgerequest %s -o yaml' shows its status", name, timeout, name)
	}
	return done, err
}

// purgeFailure explains a Failed PurgeRequest.
func purgeFailure(what string, ref v1alpha1.BindingReference, cluster string, st *v1alpha1.PurgeRequestStatus) error {
	binding := ref.Name
	if ref.Namespace != "" {
		binding = ref.Namespace + "/" + ref.Name
	}
	why := st.Message
	if why == "" {
		switch st.Reason {
		case purgeReasonBindingNotFound:
			why = "no binding " + binding
		case purgeReasonNoEvictionTask:
			why = fmt.Sprintf("binding %s has no eviction task from %s", binding, cluster)
		default:
			why = "the hub gave no reason"
		}
	}
	if st.Reason != "" {
		why += " (" + st.Reason + ")"
	}
	return fmt.Errorf("%s: purge from %s failed: %s", what, cluster, why)
}
