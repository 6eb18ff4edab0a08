package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// Protection is the FlotillaProtection plugin. It refuses UPDATE and DELETE
// of the CustomResourceDefinitions of Flotilla's API groups, and DELETE of
// the namespace of the cluster leases, to everyone outside the group
// system:masters (the hub itself and the admin kubeconfig are in it).
// RBAC alone cannot say this: flotilla-operator may write CRDs, as resource
// templates, and deleting one of Flotilla's would delete every object of its
// kind.
//
// It also refuses writes of bootstrap-token Secrets to users who may not
// manage tokens (see TokensResource), and to everyone but the hub itself
// the creation of agent certificate requests and writes of the Clusters'
// agent certificate serials (protection_agentcerts.go).
type Protection struct {
	*admission.Handler
	authorizer authorizer.Authorizer
	hubUser    string // the user the hub's own clients authenticate as
}

var _ admission.ValidationInterface = (*Protection)(nil)

// NewProtection returns the FlotillaProtection plugin of a hub whose own
// clients authenticate as hubUser.
func NewProtection(hubUser string) *Protection {
	return &Protection{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete), hubUser: hubUser}
}

// protectedGroups are the API groups whose CRDs are the hub's.
var protectedGroups = []string{v1alpha1.GroupName, appsv1alpha1.GroupName}

var (
	crdResource       = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	namespaceResource = schema.GroupResource{Resource: "namespaces"}
)

// Validate refuses a write of what only the hub writes to anyone else,
// and a protected request of a user outside system:masters.
func (p *Protection) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	resource := a.GetResource().GroupResource()
	name := objectName(a)
	if why := p.agentCertRefusal(a); why != "" {
		return apierrors.NewForbidden(resource, name, fmt.Errorf("%s; %s is not the hub", why, userName(a.GetUserInfo())))
	}
	if isMaster(a.GetUserInfo()) {
		return nil
	}
	tokenWhy, err := p.tokenRefusal(ctx, a, name)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	var why string
	switch {
	case tokenWhy != "":
		why = tokenWhy
	case resource == crdResource && a.GetOperation() != admission.Create && slices.Contains(protectedGroups, crdGroup(name)):
		why = fmt.Sprintf("the CustomResourceDefinitions of %s are the Flotilla hub's: deleting one deletes every object of its kind, "+
			"and the hub installs and upgrades them itself. Only members of group %s (the hub, the admin kubeconfig) may %s them",
			strings.Join(protectedGroups, " and "), user.SystemPrivilegedGroup, verbOf(a.GetOperation()))
	case resource == namespaceResource && a.GetOperation() == admission.Delete && name == v1alpha1.LeaseNamespace:
		why = fmt.Sprintf("namespace %s holds the leases of the member clusters: deleting it would make every cluster look unreachable "+
			"and evict its workloads. Only members of group %s (the hub, the admin kubeconfig) may delete it",
			v1alpha1.LeaseNamespace, user.SystemPrivilegedGroup)
	default:
		return nil
	}
	return apierrors.NewForbidden(resource, name, fmt.Errorf("%s; %s is not one", why, userName(a.GetUserInfo())))
}

func isMaster(u user.Info) bool {
	return u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

func userName(u user.Info) string {
	if u == nil || u.GetName() == "" {
		return "the anonymous requester"
	}
	return fmt.Sprintf("user %q", u.GetName())
}

// objectName is the name of the object a request is about. A DELETE of a
// collection is admitted once with no name and no object, then item by
// item with the item as the old object and still no name: the name then
// comes from the object.
func objectName(a admission.Attributes) string {
	if a.GetName() != "" {
		return a.GetName()
	}
	for _, obj := range []any{a.GetOldObject(), a.GetObject()} {
		if m, err := meta.Accessor(obj); err == nil && m.GetName() != "" {
			return m.GetName()
		}
	}
	return ""
}

// crdGroup is the API group of the CRD called name (plural.group).
func crdGroup(name string) string {
	_, group, _ := strings.Cut(name, ".")
	return group
}

func verbOf(op admission.Operation) string {
	if op == admission.Delete {
		return "delete"
	}
	return "update"
}
