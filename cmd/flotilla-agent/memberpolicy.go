package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/agent/memberpolicy"
)

// addPolicyFlags declares the member policy's flags, bound to s.
func addPolicyFlags(fs *pflag.FlagSet, s *memberpolicy.Settings) {
	fs.StringSliceVar(&s.AllowNamespaces, "member-policy-allow-namespaces", nil,
		`namespaces Works may write in, names or patterns with * ("team-*"), comma-separated; empty: every namespace not denied. A list of names without * also makes the agent watch its objects in those namespaces only`)
	fs.StringSliceVar(&s.DenyNamespaces, "member-policy-deny-namespaces", memberpolicy.DefaultDenyNamespaces,
		"namespaces Works may never write in, names or patterns with *; wins over the allowed ones. --system-namespace and $POD_NAMESPACE are refused always")
	fs.StringSliceVar(&s.ClusterScoped, "member-policy-cluster-scoped", nil,
		`cluster-scoped kinds Works may write, group/Kind (Kind alone for the core group; * for any group or kind), e.g. rbac.authorization.k8s.io/ClusterRole,Namespace; empty: none. Namespace lets Works set namespaces' labels and annotations`)
	fs.StringSliceVar(&s.DenyKinds, "member-policy-deny-kinds", nil,
		"kinds Works may never write, group/Kind, in any namespace and cluster-wide (e.g. Secret,rbac.authorization.k8s.io/*)")
	fs.StringVar(&s.PodSecurity, "pod-security-enforce", agent.DefaultPodSecurity,
		"Pod Security Admission level (privileged, baseline, restricted, or none) set as pod-security.kubernetes.io/enforce on the namespaces the agent creates, and on Namespaces Works hold")
}

// memberPolicy reads the policy flags; the agent's own namespaces are
// refused always.
func memberPolicy(s memberpolicy.Settings, systemNamespace string) (*memberpolicy.Policy, error) {
	reserved := []string{systemNamespace}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" && ns != systemNamespace {
		reserved = append(reserved, ns)
	}
	p, err := memberpolicy.Parse(s, reserved...)
	if err != nil {
		return nil, fmt.Errorf("member policy: %w", err)
	}
	return p, nil
}

const memberPolicyUsage = `
Member policy (--member-policy-*, --pod-security-enforce):
  The member cluster's owner bounds what the hub may write here, whatever
  the agent's RBAC allows: before applying, pruning or deleting, the agent
  checks each object's namespace and kind. A refused manifest is not
  applied; the Work's Applied condition on the hub says False, reason
  RefusedByMemberPolicy, naming the manifest and the rule, and the hub
  records an event on the Work and its Cluster; the Work's other manifests
  apply. Objects outside the policy are never deleted. By default Works may
  not write in kube-system, kube-public, kube-node-lease or the agent's own
  namespace, nor any cluster-scoped kind; namespaces the agent creates
  enforce Pod Security baseline.
`
