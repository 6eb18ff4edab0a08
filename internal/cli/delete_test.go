package cli

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDelete(t *testing.T) {
	const nginx = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nginx\n  namespace: shop\n"
	policy := "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: nginx-propagation, namespace: shop}\n"
	tests := []struct {
		name         string
		stdin        string
		args         []string
		wantCode     int
		wantStdout   string
		wantStderr   string
		wantRequests []string
	}{
		{
			name: "every object found", stdin: nginx + "---\n" + configMap("nginx-conf") + "---\n" + policy,
			args: []string{"-f", "-", "-n", "shop"}, wantCode: 0,
			wantStdout: "deployment.apps/nginx deleted\nconfigmap/nginx-conf deleted\npropagationpolicy.flotilla.io/nginx-propagation deleted\n",
			wantRequests: []string{
				"DELETE /apis/apps/v1/namespaces/shop/deployments/nginx",
				"DELETE /api/v1/namespaces/shop/configmaps/nginx-conf",
				"DELETE /apis/flotilla.io/v1alpha1/namespaces/shop/propagationpolicies/nginx-propagation",
			},
		},
		{
			name: "one not found: the context's namespace default", stdin: nginx + "---\n" + configMap("nginx-conf"),
			args: []string{"-f", "-"}, wantCode: 1,
			wantStdout: "deployment.apps/nginx deleted\nconfigmap/nginx-conf not found\n",
			wantStderr: "error: 1 of 2 objects not found on the hub\n",
			wantRequests: []string{
				"DELETE /apis/apps/v1/namespaces/shop/deployments/nginx",
				"DELETE /api/v1/namespaces/default/configmaps/nginx-conf",
			},
		},
		{
			name: "a kind the hub does not serve has no objects", stdin: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
			args: []string{"-f", "-"}, wantCode: 1,
			wantStdout: "widget.example.com/w not found\n",
			wantStderr: "error: 1 of 1 object not found on the hub\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newWorkloadHub(t)
			r := h.runStdin(t, tt.stdin, append([]string{"delete"}, tt.args...)...)
			wantExit(t, r, tt.wantCode)
			if r.stdout != tt.wantStdout || r.stderr != tt.wantStderr {
				t.Errorf("stdout %q, stderr %q; want %q and %q", r.stdout, r.stderr, tt.wantStdout, tt.wantStderr)
			}
			deletes, _ := h.sentMatching(http.MethodDelete, "/")
			if diff := cmp.Diff(tt.wantRequests, deletes); diff != "" {
				t.Errorf("deletes (-want +got):\n%s", diff)
			}
		})
	}
	h := newWorkloadHub(t)
	wantExit(t, h.runStdin(t, nginx, "delete", "-f", "-"), 0)
	if _, err := h.Kube.AppsV1().Deployments("shop").Get(context.Background(), "nginx", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment shop/nginx after delete: %v", err)
	}
}

// A document of a kind Flotilla does not take is refused before anything
// is deleted.
func TestDeleteRefusesHubKinds(t *testing.T) {
	h := newWorkloadHub(t)
	r := h.runStdin(t, "apiVersion: flotilla.io/v1alpha1\nkind: ResourceBinding\nmetadata: {name: nginx-deployment, namespace: shop}\n---\n"+
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx, namespace: shop}\n", "delete", "-f", "-")
	wantExit(t, r, 1)
	want := `error: 1 problem in the input; nothing was sent to the hub:
  <stdin>: document 1 (ResourceBinding nginx-deployment): kind: Unsupported value: "ResourceBinding": supported values: "PropagationPolicy", "ClusterPropagationPolicy", "ClusterTaintPolicy"
`
	if diff := cmp.Diff(want, r.stderr); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
	if writes := h.writes(); len(writes) != 0 {
		t.Errorf("sent %q", writes)
	}
}
