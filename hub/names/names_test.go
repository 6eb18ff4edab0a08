package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestTemplateKeys(t *testing.T) {
	tests := []struct {
		u   *unstructured.Unstructured
		key string
	}{
		{obj("apps/v1", "Deployment", "web", "nginx"), "apps/Deployment/web/nginx"},
		{obj("v1", "ConfigMap", "web", "settings"), "/ConfigMap/web/settings"},
		{obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader"), "rbac.authorization.k8s.io/ClusterRole//reader"},
		{obj("apps/v1beta1", "Deployment", "web", "nginx"), "apps/Deployment/web/nginx"}, // versions share keys
	}
	for _, tt := range tests {
		if got := TemplateKey(tt.u); got != tt.key {
			t.Errorf("TemplateKey(%s %s) = %q, want %q", tt.u.GetAPIVersion(), tt.u.GetName(), got, tt.key)
		}
		ref := v1alpha1.ObjectReference{APIVersion: tt.u.GetAPIVersion(), Kind: tt.u.GetKind(), Namespace: tt.u.GetNamespace(), Name: tt.u.GetName()}
		if got := TemplateKeyOf(ref); got != tt.key {
			t.Errorf("TemplateKeyOf(%+v) = %q, want %q", ref, got, tt.key)
		}
		gk, ns, name, ok := ParseTemplateKey(tt.key)
		if !ok || gk != tt.u.GroupVersionKind().GroupKind() || ns != tt.u.GetNamespace() || name != tt.u.GetName() {
			t.Errorf("ParseTemplateKey(%q) = %v %q %q %t", tt.key, gk, ns, name, ok)
		}
	}
	for _, bad := range []string{"", "apps/Deployment/web", "apps//web/nginx", "apps/Deployment/web/"} {
		if _, _, _, ok := ParseTemplateKey(bad); ok {
			t.Errorf("ParseTemplateKey(%q) ok", bad)
		}
	}
}

func TestBindingName(t *testing.T) {
	if got := BindingName("nginx", "Deployment"); got != "nginx-deployment" {
		t.Errorf("BindingName = %q, want nginx-deployment", got)
	}
}

func TestWorkName(t *testing.T) {
	short := WorkName("web/nginx-deployment", "nginx-deployment")
	if !strings.HasPrefix(short, "nginx-deployment-") || len(short) != len("nginx-deployment-")+8 {
		t.Errorf("WorkName of a short name = %q, want nginx-deployment-<8 hex digits>", short)
	}
	if other := WorkName("shop/nginx-deployment", "nginx-deployment"); other == short {
		t.Errorf("bindings of two namespaces share the Work name %q", short)
	}
	// Cut to fit a label value (63 bytes), without a trailing '-' or '.'.
	long := strings.Repeat("a", 53) + "-" + strings.Repeat("b", 20)
	got := WorkName("web/"+long, long)
	if len(got) > 63 || !strings.HasPrefix(got, strings.Repeat("a", 53)+"-") || strings.Contains(got, "--") {
		t.Errorf("WorkName of a %d-byte name = %q (%d bytes)", len(long), got, len(got))
	}
}
