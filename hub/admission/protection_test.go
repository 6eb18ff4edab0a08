package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/kubernetes/pkg/apis/core"
)

func TestProtection(t *testing.T) {
	crdKind := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	nsKind := corev1.SchemeGroupVersion.WithKind("Namespace")
	crd := func(name string) runtime.Object {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	ns := func(name string) runtime.Object { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	const (
		crdRefusal = `customresourcedefinitions.apiextensions.k8s.io "%s" is forbidden: the CustomResourceDefinitions of flotilla.io and apps.flotilla.io ` +
			`are the Flotilla hub's: deleting one deletes every object of its kind, and the hub installs and upgrades them itself. ` +
			`Only members of group system:masters (the hub, the admin kubeconfig) may %s them; %s is not one`
		nsRefusal = `namespaces "flotilla-cluster-lease" is forbidden: namespace flotilla-cluster-lease holds the leases of the member clusters: ` +
			`deleting it would make every cluster look unreachable and evict its workloads. ` +
			`Only members of group system:masters (the hub, the admin kubeconfig) may delete it; user "otto" is not one`
	)
	tests := []struct {
		name string
		op   admission.Operation
		gvk  schema.GroupVersionKind
		res  string
		sub  string
		// name is the request's; obj and old the objects.
		reqName  string
		obj, old runtime.Object
		user     user.Info
		want     string // the refusal; "" = admitted
	}{
		{name: "operator deletes a Flotilla CRD", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "clusters.flotilla.io",
			old: crd("clusters.flotilla.io"), want: fmt.Sprintf(crdRefusal, "clusters.flotilla.io", "delete", `user "otto"`)},
		{name: "operator updates an apps.flotilla.io CRD", op: admission.Update, gvk: crdKind, res: "customresourcedefinitions", reqName: "workloadrebalancers.apps.flotilla.io",
			obj: crd("workloadrebalancers.apps.flotilla.io"), old: crd("workloadrebalancers.apps.flotilla.io"),
			want: fmt.Sprintf(crdRefusal, "workloadrebalancers.apps.flotilla.io", "update", `user "otto"`)},
		{name: "operator updates the status of a Flotilla CRD", op: admission.Update, gvk: crdKind, res: "customresourcedefinitions", sub: "status", reqName: "works.flotilla.io",
			obj: crd("works.flotilla.io"), old: crd("works.flotilla.io"), want: fmt.Sprintf(crdRefusal, "works.flotilla.io", "update", `user "otto"`)},
		{name: "operator deletes a collection of CRDs", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions",
			old: crd("propagationpolicies.flotilla.io"), want: fmt.Sprintf(crdRefusal, "propagationpolicies.flotilla.io", "delete", `user "otto"`)},
		{name: "collection before its items", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions"},
		{name: "anonymous deletes a Flotilla CRD", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "clusters.flotilla.io",
			user: &user.DefaultInfo{}, want: fmt.Sprintf(crdRefusal, "clusters.flotilla.io", "delete", "the anonymous requester")},
		{name: "admin deletes a Flotilla CRD", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "clusters.flotilla.io",
			old: crd("clusters.flotilla.io"), user: admin},
		{name: "operator deletes a template CRD", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "widgets.example.com",
			old: crd("widgets.example.com")},
		{name: "operator deletes a CRD of a subgroup", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "widgets.test.flotilla.io",
			old: crd("widgets.test.flotilla.io")},
		{name: "operator deletes a CRD named like a group", op: admission.Delete, gvk: crdKind, res: "customresourcedefinitions", reqName: "flotilla.io",
			old: crd("flotilla.io")},
		{name: "operator deletes the lease namespace", op: admission.Delete, gvk: nsKind, res: "namespaces", reqName: "flotilla-cluster-lease",
			old: ns("flotilla-cluster-lease"), want: nsRefusal},
		{name: "operator updates the lease namespace", op: admission.Update, gvk: nsKind, res: "namespaces", reqName: "flotilla-cluster-lease",
			obj: ns("flotilla-cluster-lease"), old: ns("flotilla-cluster-lease")},
		{name: "operator deletes another namespace", op: admission.Delete, gvk: nsKind, res: "namespaces", reqName: "default", old: ns("default")},
		{name: "admin deletes the lease namespace", op: admission.Delete, gvk: nsKind, res: "namespaces", reqName: "flotilla-cluster-lease",
			old: ns("flotilla-cluster-lease"), user: admin},
		{name: "operator deletes a Flotilla object", op: admission.Delete, gvk: clusterGVK, res: "clusters", reqName: "clusters.flotilla.io"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: tt.gvk, resource: tt.res, subresource: tt.sub, name: tt.reqName, obj: tt.obj, old: tt.old, user: tt.user}
			err := NewProtection(hubUser.Name).Validate(context.Background(), r.attributes(), nil)
			if tt.want == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("error = %v, want Forbidden", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProtectionOfTokens: only users the authorizer lets manage
// bootstraptokens.flotilla.io write bootstrap-token Secrets.
func TestProtectionOfTokens(t *testing.T) {
	secretKind := corev1.SchemeGroupVersion.WithKind("Secret")
	secret := func(namespace, name string, typ core.SecretType) runtime.Object {
		return &core.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: typ}
	}
	const tokenType = core.SecretType("bootstrap.kubernetes.io/token")
	ada := &user.DefaultInfo{Name: "ada", Groups: []string{user.AllAuthenticated}}
	refusal := func(verb, name string) string {
		return fmt.Sprintf(`secrets "%s" is forbidden: bootstrap tokens let a member cluster join the fleet: only users who may %s bootstraptokens.flotilla.io `+
			`(flotilla-admin) may %s them; user "otto" is not one`, name, verb, verb)
	}
	tests := []struct {
		name string
		op   admission.Operation
		obj  runtime.Object // the new object, or the old one for a delete
		user user.Info
		want string
	}{
		{name: "operator creates a token", op: admission.Create, obj: secret("kube-system", "bootstrap-token-abcdef", tokenType),
			want: refusal("create", "bootstrap-token-abcdef")},
		{name: "operator creates a token under another name", op: admission.Create, obj: secret("kube-system", "innocent", tokenType),
			want: refusal("create", "innocent")},
		{name: "operator updates a token", op: admission.Update, obj: secret("kube-system", "bootstrap-token-abcdef", tokenType),
			want: refusal("update", "bootstrap-token-abcdef")},
		{name: "operator deletes a token", op: admission.Delete, obj: secret("kube-system", "bootstrap-token-abcdef", tokenType),
			want: refusal("delete", "bootstrap-token-abcdef")},
		{name: "operator creates a token-named Secret of another type", op: admission.Create, obj: secret("kube-system", "bootstrap-token-abcdef", core.SecretTypeOpaque),
			want: refusal("create", "bootstrap-token-abcdef")},
		{name: "a user allowed bootstraptokens creates a token", op: admission.Create, obj: secret("kube-system", "bootstrap-token-abcdef", tokenType), user: ada},
		{name: "system:masters creates a token", op: admission.Create, obj: secret("kube-system", "bootstrap-token-abcdef", tokenType), user: admin},
		{name: "operator creates an ordinary Secret in kube-system", op: admission.Create, obj: secret("kube-system", "app", core.SecretTypeOpaque)},
		{name: "operator creates a token-typed Secret elsewhere", op: admission.Create, obj: secret("web", "bootstrap-token-abcdef", tokenType)},
	}
	allowAda := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "ada" && a.GetAPIGroup() == "flotilla.io" && a.GetResource() == TokensResource {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{op: tt.op, gvk: secretKind, resource: "secrets", user: tt.user}
			if tt.op == admission.Delete {
				r.old = tt.obj
			} else {
				r.obj = tt.obj
			}
			r.name = tt.obj.(*core.Secret).Name
			p := NewProtection(hubUser.Name)
			p.SetAuthorizer(allowAda)
			err := p.Validate(context.Background(), r.attributes(), nil)
			got := ""
			if err != nil {
				if !apierrors.IsForbidden(err) {
					t.Fatalf("error = %v, want Forbidden", err)
				}
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}
