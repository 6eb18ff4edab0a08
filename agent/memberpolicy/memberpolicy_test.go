package memberpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s Settings) *Policy {
	t.Helper()
	p, err := Parse(s, "flotilla-system")
	if err != nil {
		t.Fatalf("Parse(%+v): %v", s, err)
	}
	return p
}

var (
	deployment = Kind{Group: "apps", Kind: "Deployment"}
	secret     = Kind{Kind: "Secret"}
	crb        = Kind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}
	crd        = Kind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
)

func TestCheck(t *testing.T) {
	defaults := Settings{DenyNamespaces: DefaultDenyNamespaces}
	for _, tc := range []struct {
		name     string
		settings Settings
		obj      Object
		// rule is a part of the refusing rule; "" means allowed.
		rule string
	}{
		{"deployment in default", defaults, Object{Kind: deployment, Namespace: "default", Name: "web", Namespaced: true}, ""},
		{"deployment in kube-system", defaults, Object{Kind: deployment, Namespace: "kube-system", Name: "web", Namespaced: true}, "memberPolicy.namespaces.deny"},
		{"secret in kube-node-lease", defaults, Object{Kind: secret, Namespace: "kube-node-lease", Name: "s", Namespaced: true}, `"kube-node-lease"`},
		{"the agent's namespace", Settings{}, Object{Kind: secret, Namespace: "flotilla-system", Name: "cert", Namespaced: true}, "agent's own"},
		{"agent's namespace even if allowed", Settings{AllowNamespaces: []string{"flotilla-system"}}, Object{Kind: secret, Namespace: "flotilla-system", Name: "cert", Namespaced: true}, "agent's own"},
		{"cluster role binding", defaults, Object{Kind: crb, Name: "admin"}, "memberPolicy.clusterScoped.allow"},
		{"listed cluster role binding", Settings{ClusterScoped: []string{"rbac.authorization.k8s.io/ClusterRoleBinding"}}, Object{Kind: crb, Name: "admin"}, ""},
		{"group wildcard", Settings{ClusterScoped: []string{"apiextensions.k8s.io/*"}}, Object{Kind: crd, Name: "widgets.example.com"}, ""},
		{"group wildcard other group", Settings{ClusterScoped: []string{"apiextensions.k8s.io/*"}}, Object{Kind: crb, Name: "x"}, "clusterScoped"},
		{"everything", Settings{ClusterScoped: []string{"*/*"}}, Object{Kind: crb, Name: "x"}, ""},
		{"namespace object unlisted", defaults, Object{Kind: NamespaceKind, Name: "shop"}, "clusterScoped"},
		{"namespace object listed", Settings{ClusterScoped: []string{"Namespace"}}, Object{Kind: NamespaceKind, Name: "shop"}, ""},
		{"namespace object listed but denied", Settings{ClusterScoped: []string{"Namespace"}, DenyNamespaces: DefaultDenyNamespaces}, Object{Kind: NamespaceKind, Name: "kube-system"}, "namespaces.deny"},
		{"allow list", Settings{AllowNamespaces: []string{"team-*", "shop"}}, Object{Kind: deployment, Namespace: "team-a", Name: "w", Namespaced: true}, ""},
		{"allow list exact", Settings{AllowNamespaces: []string{"team-*", "shop"}}, Object{Kind: deployment, Namespace: "shop", Name: "w", Namespaced: true}, ""},
		{"not in allow list", Settings{AllowNamespaces: []string{"team-*", "shop"}}, Object{Kind: deployment, Namespace: "default", Name: "w", Namespaced: true}, "namespaces.allow"},
		{"deny beats allow", Settings{AllowNamespaces: []string{"team-*"}, DenyNamespaces: []string{"team-admin"}}, Object{Kind: deployment, Namespace: "team-admin", Name: "w", Namespaced: true}, "namespaces.deny"},
		{"denied kind", Settings{DenyKinds: []string{"Secret"}}, Object{Kind: secret, Namespace: "default", Name: "s", Namespaced: true}, "memberPolicy.kinds.deny"},
		{"denied kind beats cluster-scoped allow", Settings{ClusterScoped: []string{"*/*"}, DenyKinds: []string{"rbac.authorization.k8s.io/*"}}, Object{Kind: crb, Name: "x"}, "kinds.deny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mustParse(t, tc.settings).Check(tc.obj)
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *Refused
			if !errors.As(err, &refused) {
				t.Fatalf("got %v, want a refusal by %s", err, tc.rule)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.rule) || !strings.Contains(msg, Reason) || !strings.Contains(msg, tc.obj.Name) {
				t.Errorf("message %q: want the object, %s and the rule %s", msg, Reason, tc.rule)
			}
		})
	}
}

func TestFixedNamespaces(t *testing.T) {
	for _, tc := range []struct {
		allow []string
		want  []string
		ok    bool
	}{
		{nil, nil, false},
		{[]string{"team-*"}, nil, false},
		{[]string{"shop", "web", "shop", "kube-system", "flotilla-system"}, []string{"shop", "web"}, true},
	} {
		got, ok := mustParse(t, Settings{AllowNamespaces: tc.allow, DenyNamespaces: DefaultDenyNamespaces}).FixedNamespaces()
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("FixedNamespaces of %v = %v, %v; want %v, %v", tc.allow, got, ok, tc.want, tc.ok)
		}
	}
}

func TestNamespaceLabels(t *testing.T) {
	if got := mustParse(t, Settings{PodSecurity: "baseline"}).NamespaceLabels(); got[LabelPodSecurityEnforce] != "baseline" {
		t.Errorf("baseline: labels %v", got)
	}
	if got := mustParse(t, Settings{PodSecurity: "none"}).NamespaceLabels(); got != nil {
		t.Errorf("none: labels %v, want none", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		settings Settings
		want     string
	}{
		{Settings{AllowNamespaces: []string{"Kube_System"}}, "--member-policy-allow-namespaces"},
		{Settings{DenyNamespaces: []string{"a/b"}}, "--member-policy-deny-namespaces"},
		{Settings{ClusterScoped: []string{"rbac/Cluster Role"}}, "--member-policy-cluster-scoped"},
		{Settings{ClusterScoped: []string{"Bad_Group!/Kind"}}, "is not a DNS subdomain"},
		{Settings{DenyKinds: []string{"a/b/c"}}, "--member-policy-deny-kinds"},
		{Settings{PodSecurity: "strict"}, "--pod-security-enforce"},
	} {
		_, err := Parse(tc.settings)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%+v) = %v, want an error with %q", tc.settings, err, tc.want)
		}
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]Kind{
		"Namespace":                       NamespaceKind,
		"core/Namespace":                  NamespaceKind,
		"/Namespace":                      NamespaceKind,
		" apps/Deployment ":               deployment,
		"scheduling.k8s.io/PriorityClass": {Group: "scheduling.k8s.io", Kind: "PriorityClass"},
		"*/*":                             {Group: "*", Kind: "*"},
	} {
		got, err := ParseKind(in)
		if err != nil || got != want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// FuzzParseKind checks that ParseKind never panics and that what it reads
// reads back the same from its String.
func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"Namespace", "apps/Deployment", "*/*", "core/Pod", "a/b/c", "", "/", "x.y/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKind(s)
		if err != nil {
			return
		}
		again, err := ParseKind(k.String())
		if err != nil || again != k {
			t.Fatalf("ParseKind(%q) = %v; its String %q reads as %v, %v", s, k, k.String(), again, err)
		}
	})
}

// FuzzParseNamespace checks that ParseNamespace never panics and accepts
// only what matching can use.
func FuzzParseNamespace(f *testing.F) {
	for _, s := range []string{"default", "team-*", "*", "-a", "a/b", "[", strings.Repeat("a", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := ParseNamespace(s)
		if err != nil {
			return
		}
		if len(ns) > 63 || strings.ContainsAny(ns, "/[]?\\") {
			t.Fatalf("ParseNamespace(%q) accepted %q", s, ns)
		}
		p := &Policy{DenyNamespaces: []string{ns}}
		if !isPattern(ns) && p.CheckNamespace(ns) == nil {
			t.Fatalf("namespace %q denied by its own name is allowed", ns)
		}
	})
}
