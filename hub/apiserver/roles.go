package apiserver

import (
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
)

// Names of the ClusterRoles the hub installs; bind them to users, groups or
// ServiceAccounts with ordinary (Cluster)RoleBindings.
const (
	ViewerRole   = "flotilla-viewer"
	OperatorRole = "flotilla-operator"
	AdminRole    = "flotilla-admin"
)

var (
	read  = []string{"get", "list", "watch"}
	write = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	// templateGroups are the API groups of resource templates an operator
	// may apply. RBAC objects among them are still subject to the API
	// server's escalation check: an operator cannot grant on the hub what it
	// does not hold (no bind, escalate or impersonate verbs here).
	templateGroups = []string{"", "apps", "batch", "autoscaling", "networking.k8s.io", "policy",
		"rbac.authorization.k8s.io", "storage.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io", "discovery.k8s.io"}
	// coreTemplates are the core kinds an operator may apply; listed so that
	// subresources such as serviceaccounts/token stay out of reach.
	coreTemplates = []string{"configmaps", "secrets", "services", "serviceaccounts", "namespaces", "persistentvolumeclaims",
		"persistentvolumes", "limitranges", "resourcequotas", "pods", "replicationcontrollers", "endpoints"}
)

func rule(groups, resources, verbs []string) *rbacv1ac.PolicyRuleApplyConfiguration {
	return rbacv1ac.PolicyRule().WithAPIGroups(groups...).WithResources(resources...).WithVerbs(verbs...)
}

// viewerRules read the fleet: clusters, leases, policies, bindings, Works,
// rebalancers and events (not the templates themselves, which may be
// Secrets).
func viewerRules() []*rbacv1ac.PolicyRuleApplyConfiguration {
	return []*rbacv1ac.PolicyRuleApplyConfiguration{
		rule([]string{"flotilla.io", "apps.flotilla.io", "policy.karmada.io", "apps.karmada.io"}, []string{"*"}, read),
		rule([]string{"coordination.k8s.io"}, []string{"leases"}, read),
		rule([]string{"", "events.k8s.io"}, []string{"events"}, read),
		rule([]string{""}, []string{"namespaces"}, read),
	}
}

// ClusterRoles are flotilla-viewer (read), flotilla-operator (apply
// templates and policies, taint and cordon clusters, rebalance, purge) and
// flotilla-admin (everything, as cluster-admin). ClusterTaintPolicies
// taint clusters and so can evict every workload of the fleet: only
// flotilla-admin writes them; the others read them.
func ClusterRoles() []*rbacv1ac.ClusterRoleApplyConfiguration {
	labels := map[string]string{"app.kubernetes.io/part-of": "flotilla"}
	operator := append(viewerRules(),
		rule([]string{"flotilla.io", "policy.karmada.io"}, []string{"propagationpolicies", "clusterpropagationpolicies"}, write),
		rule([]string{"apps.flotilla.io", "apps.karmada.io"}, []string{"workloadrebalancers"}, write),
		rule([]string{"flotilla.io"}, []string{"purgerequests"}, write),
		rule([]string{"flotilla.io"}, []string{"clusters"}, []string{"update", "patch"}),
		rule([]string{""}, coreTemplates, write),
		rule(templateGroups[1:], []string{"*"}, write),
	)
	return []*rbacv1ac.ClusterRoleApplyConfiguration{
		rbacv1ac.ClusterRole(ViewerRole).WithLabels(labels).WithRules(viewerRules()...),
		rbacv1ac.ClusterRole(OperatorRole).WithLabels(labels).WithRules(operator...),
		rbacv1ac.ClusterRole(AdminRole).WithLabels(labels).WithRules(
			rule([]string{"*"}, []string{"*"}, []string{"*"}),
			rbacv1ac.PolicyRule().WithNonResourceURLs("*").WithVerbs("*"),
		),
	}
}
