package cli

import (
	"strings"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// defaultNamespace is where namespaced kinds are read and written without
// -n when the kubeconfig context names no namespace, as with kubectl.
const defaultNamespace = "default"

// getTarget is what one "get" reads.
type getTarget struct {
	name      string
	namespace string // empty: every namespace, or none for cluster-scoped kinds
	cluster   string // the cluster chosen with --cluster, for messages
	across    bool   // the list spans namespaces (clusters, for works)
}

// where is " in namespace shop" or " in cluster edge-1", for "No ... found".
func (t getTarget) where() string {
	switch {
	case t.cluster != "":
		return " in cluster " + t.cluster
	case t.namespace != "":
		return " in namespace " + t.namespace
	}
	return ""
}

// target checks -n, -A and --cluster against the kind and each other, and
// returns what to read.
func (o *getOptions) target(inv *invocation, res getResource, name string) (getTarget, error) {
	if err := o.checkFlags(inv, res); err != nil {
		return getTarget{}, err
	}
	t := getTarget{name: name}
	switch res.scope {
	case namespaced:
		if !o.allNamespaces {
			t.namespace = o.namespace
			if t.namespace == "" {
				ns, err := inv.defaultNamespace()
				if err != nil {
					return getTarget{}, err
				}
				t.namespace = ns
			}
			return t, nil
		}
		if name != "" {
			return getTarget{}, inv.usagef("a name needs a namespace: drop -A (and give -n if it is not %s)", defaultNamespace)
		}
		t.across = true
	case perCluster:
		switch {
		case o.cluster != "":
			t.namespace, t.cluster = v1alpha1.ExecutionNamespace(o.cluster), o.cluster
		case o.namespace != "":
			t.namespace = o.namespace
		case name != "":
			return getTarget{}, inv.usagef("a Work is named within its cluster: give --cluster")
		default:
			t.across = true
		}
	case filtered:
		// The list mixes namespaces (and cluster-scoped templates) unless
		// -n picks one; NAMESPACE stays, so the columns do not change.
		t.namespace, t.across = o.namespace, true
	}
	return t, nil
}

// checkFlags rejects flags that contradict each other or do not apply to
// the kind.
func (o *getOptions) checkFlags(inv *invocation, res getResource) error {
	switch {
	case o.namespace != "" && o.allNamespaces:
		return inv.usagef("-n and -A exclude each other: give one namespace or all of them")
	case o.cluster != "" && res.scope != perCluster:
		return inv.usagef("--cluster applies to works only, not to %s", res.plural)
	case o.cluster != "" && (o.namespace != "" || o.allNamespaces):
		return inv.usagef("--cluster picks the namespace of the works: drop -n and -A")
	}
	if o.namespace != "" {
		if err := checkNamespace(inv, o.namespace); err != nil {
			return err
		}
	}
	if o.cluster != "" {
		return checkName(inv, o.cluster)
	}
	return nil
}

// checkName rejects an object name that cannot be a path segment of the
// hub's API, so it is never sent.
func checkName(inv *invocation, name string) error {
	if name == "" {
		return inv.usagef("invalid name %q: must not be empty", name)
	}
	if errs := content.IsPathSegmentName(name); len(errs) > 0 {
		return inv.usagef("invalid name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// checkNamespace rejects a namespace Kubernetes would not accept: a typo
// caught here is a clear message rather than an empty list.
func checkNamespace(inv *invocation, ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return inv.usagef("invalid namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}
