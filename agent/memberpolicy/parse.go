package memberpolicy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Kind is an API group and kind. "*" as either matches any.
type Kind struct {
	Group string
	Kind  string
}

// NamespaceKind is the core Namespace kind.
var NamespaceKind = Kind{Kind: "Namespace"}

// String writes k as ParseKind reads it: Kind for the core group,
// group/Kind otherwise.
func (k Kind) String() string {
	if k.Group == "" {
		return k.Kind
	}
	return k.Group + "/" + k.Kind
}

func (k Kind) matches(o Kind) bool {
	return (k.Group == "*" || k.Group == o.Group) && (k.Kind == "*" || k.Kind == o.Kind)
}

func matchKind(list []Kind, k Kind) (Kind, bool) {
	for _, entry := range list {
		if entry.matches(k) {
			return entry, true
		}
	}
	return Kind{}, false
}

var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{0,62}$`)

// ParseKind reads "group/Kind", "Kind" or "core/Kind" (the core group),
// with "*" for any group or any kind: "rbac.authorization.k8s.io/ClusterRole",
// "Namespace", "apiextensions.k8s.io/*".
func ParseKind(s string) (Kind, error) {
	group, kind, found := strings.Cut(strings.TrimSpace(s), "/")
	if !found {
		group, kind = "", group
	}
	if group == "core" {
		group = ""
	}
	if group != "" && group != "*" {
		if msgs := validation.IsDNS1123Subdomain(group); len(msgs) > 0 {
			return Kind{}, fmt.Errorf("%q: group %q is not a DNS subdomain: %s", s, group, strings.Join(msgs, "; "))
		}
	}
	if kind != "*" && !kindPattern.MatchString(kind) {
		return Kind{}, fmt.Errorf("%q: kind %q is not a kind (a letter, then letters and digits; or *): write group/Kind, or Kind for the core group", s, kind)
	}
	return Kind{Group: group, Kind: kind}, nil
}

var namespacePattern = regexp.MustCompile(`^[a-z0-9*]([-a-z0-9*]{0,61}[a-z0-9*])?$`)

// ParseNamespace reads a namespace name or a pattern of one with "*"
// standing for any characters ("team-*").
func ParseNamespace(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !namespacePattern.MatchString(s) {
		return "", fmt.Errorf("%q is not a namespace name (a DNS-1123 label) or a pattern of one with *", s)
	}
	return s, nil
}

func isPattern(s string) bool { return strings.Contains(s, "*") }

// Pod Security Admission levels.
var podSecurityLevels = []string{"privileged", "baseline", "restricted"}

// ParsePodSecurity reads a Pod Security Admission level; "" or "none"
// means no label.
func ParsePodSecurity(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "none":
		return "", nil
	case slices.Contains(podSecurityLevels, s):
		return s, nil
	}
	return "", fmt.Errorf("%q: want privileged, baseline, restricted or none", s)
}

// Settings are the policy as flags give it, unparsed.
type Settings struct {
	AllowNamespaces, DenyNamespaces []string
	ClusterScoped, DenyKinds        []string
	PodSecurity                     string
}

// Parse reads settings into a Policy that also refuses the reserved
// namespaces (the agent's own). Errors name the flag at fault.
func Parse(s Settings, reserved ...string) (*Policy, error) {
	p := &Policy{Reserved: reserved}
	var errs []error
	add := func(rule string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rule, err))
		}
	}
	var err error
	p.AllowNamespaces, err = parseList(s.AllowNamespaces, ParseNamespace)
	add(RuleAllowNamespaces, err)
	p.DenyNamespaces, err = parseList(s.DenyNamespaces, ParseNamespace)
	add(RuleDenyNamespaces, err)
	p.ClusterScoped, err = parseList(s.ClusterScoped, ParseKind)
	add(RuleClusterScoped, err)
	p.DenyKinds, err = parseList(s.DenyKinds, ParseKind)
	add(RuleDenyKinds, err)
	p.PodSecurity, err = ParsePodSecurity(s.PodSecurity)
	add("--pod-security-enforce (memberPolicy.podSecurity.enforce)", err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// parseList parses each non-empty entry of list.
func parseList[T any](list []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	var errs []error
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			continue
		}
		v, err := parse(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}
