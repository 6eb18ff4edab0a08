// Package memberpolicy is the member cluster's bound on what the hub may
// write there: which namespaces, which namespaced kinds and which
// cluster-scoped kinds a Work may create, change and delete, and the Pod
// Security Admission level of the namespaces the agent creates.
//
// The member cluster's owner sets the policy (agent flags, from the agent
// chart's values); the agent checks every manifest and every object it
// would prune or delete against it before it touches the cluster, so a
// compromised hub or a hostile hub operator cannot write outside it, even
// where the agent's RBAC would allow. The package is pure logic: no
// clients, no I/O.
package memberpolicy

import (
	"fmt"
	"path"
	"slices"

	"github.com/flotilla-io/flotilla/protocol"
)

// Reason is the reason the agent and the hub give for a refusal.
const Reason = protocol.ReasonRefusedByMemberPolicy

// Names of the settings, as the agent's flags and the chart's values spell
// them, for messages that tell the member's owner what to change.
const (
	RuleAllowNamespaces = "--member-policy-allow-namespaces (memberPolicy.namespaces.allow)"
	RuleDenyNamespaces  = "--member-policy-deny-namespaces (memberPolicy.namespaces.deny)"
	RuleClusterScoped   = "--member-policy-cluster-scoped (memberPolicy.clusterScoped.allow)"
	RuleDenyKinds       = "--member-policy-deny-kinds (memberPolicy.kinds.deny)"
	RuleAgentNamespace  = "the agent's own namespace (always refused)"
)

// DefaultDenyNamespaces are refused unless the member's owner says
// otherwise; the agent's own namespaces are refused always.
var DefaultDenyNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Policy bounds the hub. The zero Policy refuses every cluster-scoped kind
// and allows every namespace; a nil *Policy bounds nothing.
type Policy struct {
	// AllowNamespaces are namespace names or patterns ("team-*"); empty
	// allows every namespace that is not denied.
	AllowNamespaces []string
	// DenyNamespaces are refused even if allowed.
	DenyNamespaces []string
	// Reserved are the agent's own namespaces, refused whatever the
	// settings say.
	Reserved []string
	// ClusterScoped are the cluster-scoped kinds the hub may write; none
	// by default.
	ClusterScoped []Kind
	// DenyKinds are refused in every namespace and cluster-wide.
	DenyKinds []Kind
	// PodSecurity is the Pod Security Admission level the namespaces the
	// agent creates enforce; "" sets no label.
	PodSecurity string
}

// Refused is the error of a manifest or object the policy refuses.
type Refused struct {
	// Object names what was refused.
	Object string
	// Why says which part of it the rule refuses.
	Why string
	// Rule is the setting that refuses it.
	Rule string
}

func (r *Refused) Error() string {
	return fmt.Sprintf("%s: %s: %s by %s", r.Object, Reason, r.Why, r.Rule)
}

// Object is what the policy judges: an object's kind, namespace (empty
// for a cluster-scoped one) and name.
type Object struct {
	Kind      Kind
	Namespace string
	Name      string
	// Namespaced says whether the kind is namespaced, as the member
	// cluster serves it.
	Namespaced bool
}

func (o Object) String() string {
	s := o.Kind.String() + " "
	if o.Namespace != "" {
		s += o.Namespace + "/"
	}
	return s + o.Name
}

// Check returns nil if the hub may write o, else a *Refused saying why.
// A Namespace object is judged as a cluster-scoped kind and by its name
// as a namespace.
func (p *Policy) Check(o Object) error {
	if p == nil {
		return nil
	}
	refuse := func(why, rule string) error { return &Refused{Object: o.String(), Why: why, Rule: rule} }
	if k, ok := matchKind(p.DenyKinds, o.Kind); ok {
		return refuse(fmt.Sprintf("kind %s is denied", o.Kind), fmt.Sprintf("%s entry %q", RuleDenyKinds, k))
	}
	if !o.Namespaced {
		if _, ok := matchKind(p.ClusterScoped, o.Kind); !ok {
			return refuse(fmt.Sprintf("cluster-scoped kind %s is not allowed", o.Kind), RuleClusterScoped)
		}
	}
	switch {
	case o.Namespaced:
		return p.checkNamespace(o.Namespace, refuse)
	case o.Kind == NamespaceKind:
		return p.checkNamespace(o.Name, refuse)
	}
	return nil
}

// CheckNamespace returns nil if the hub may write in namespace ns.
func (p *Policy) CheckNamespace(ns string) error {
	if p == nil {
		return nil
	}
	return p.checkNamespace(ns, func(why, rule string) error {
		return &Refused{Object: "namespace " + ns, Why: why, Rule: rule}
	})
}

func (p *Policy) checkNamespace(ns string, refuse func(why, rule string) error) error {
	if slices.Contains(p.Reserved, ns) {
		return refuse(fmt.Sprintf("namespace %q is the agent's own", ns), RuleAgentNamespace)
	}
	if pat, ok := matchName(p.DenyNamespaces, ns); ok {
		return refuse(fmt.Sprintf("namespace %q is denied", ns), fmt.Sprintf("%s entry %q", RuleDenyNamespaces, pat))
	}
	if len(p.AllowNamespaces) > 0 {
		if _, ok := matchName(p.AllowNamespaces, ns); !ok {
			return refuse(fmt.Sprintf("namespace %q is not in the allowed list %v", ns, p.AllowNamespaces), RuleAllowNamespaces)
		}
	}
	return nil
}

// FixedNamespaces returns the allowed namespaces when they are a list of
// names without patterns, minus the refused ones: the agent may then watch
// its objects in each of them instead of across the cluster. ok is false
// when any namespace may be allowed.
func (p *Policy) FixedNamespaces() (namespaces []string, ok bool) {
	if p == nil || len(p.AllowNamespaces) == 0 {
		return nil, false
	}
	for _, ns := range p.AllowNamespaces {
		if isPattern(ns) {
			return nil, false
		}
		if p.CheckNamespace(ns) == nil && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	return namespaces, true
}

// NamespaceLabels are the labels of a namespace the agent creates: the
// Pod Security Admission level to enforce, if any.
func (p *Policy) NamespaceLabels() map[string]string {
	if p == nil || p.PodSecurity == "" {
		return nil
	}
	return map[string]string{LabelPodSecurityEnforce: p.PodSecurity}
}

// LabelPodSecurityEnforce is Pod Security Admission's enforce label.
const LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"

func matchName(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		// Patterns are checked when parsed: a bad one matches nothing.
		if ok, err := path.Match(p, name); err == nil && ok {
			return p, true
		}
	}
	return "", false
}
