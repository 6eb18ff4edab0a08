package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig with one context per entry of
// servers (context name: URL), each with the bearer token, and current
// context current; it returns its path.
func writeKubeconfig(t *testing.T, current string, servers map[string]string, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, server := range servers {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	cfg.CurrentContext = current
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedServer is the URL of a port nothing listens on.
func closedServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}

func TestConnectionRefused(t *testing.T) {
	url := closedServer(t)
	kubeconfig := writeKubeconfig(t, "hub", map[string]string{"hub": url}, "t")
	r := runEnv(t, nil, "--kubeconfig", kubeconfig, "get", "clusters")
	wantExit(t, r, 1)
	for _, want := range []string{"error: cannot reach the hub at " + url + ": ", "connection refused", "--kubeconfig"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr = %q, want it to contain %q", r.stderr, want)
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	kubeconfig := writeKubeconfig(t, "hub", map[string]string{"hub": srv.URL}, "t")
	r := runEnv(t, map[string]string{"KUBECONFIG": kubeconfig}, "get", "leases", "--timeout", "50ms")
	wantExit(t, r, 1)
	want := "error: the hub at " + srv.URL + " did not answer within 50ms (raise --timeout, or check --kubeconfig and --context)"
	if !strings.HasPrefix(r.stderr, want) {
		t.Errorf("stderr = %q, want it to start with %q", r.stderr, want)
	}
}

// An answer that is not a Status still gives a message with what the
// server said.
func TestNonStatusError(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream exploded", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := writeKubeconfig(t, "hub", map[string]string{"hub": srv.URL}, "t")
	r := runEnv(t, map[string]string{"KUBECONFIG": kubeconfig}, "get", "clusters")
	wantExit(t, r, 1)
	if !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, "upstream exploded") {
		t.Errorf("stderr = %q, want the server's answer", r.stderr)
	}
}

// The kubeconfig's credentials go with every request.
func TestBearerToken(t *testing.T) {
	var (
		mu   sync.Mutex
		auth []string
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"flotilla.io/v1alpha1","kind":"ClusterList","metadata":{},"items":[]}`))
	}))
	t.Cleanup(srv.Close)
	kubeconfig := writeKubeconfig(t, "hub", map[string]string{"hub": srv.URL}, "s3cret")
	r := runEnv(t, map[string]string{"KUBECONFIG": kubeconfig}, "get", "clusters")
	wantExit(t, r, 0)
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"Bearer s3cret"}, auth); diff != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", diff)
	}
}

func TestUnauthorized(t *testing.T) {
	h := newHub(t)
	kubeconfig := writeKubeconfig(t, "stranger", map[string]string{"stranger": h.Server}, "not-a-token")
	r := runEnv(t, nil, "--kubeconfig", kubeconfig, "get", "clusters")
	wantExit(t, r, 1)
	want := `error: the hub at ` + h.Server + ` refused the credentials of kubeconfig context "stranger" (Unauthorized): check --kubeconfig and --context` + "\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

// --kubeconfig wins over $KUBECONFIG, --context over the current context,
// and the context's namespace is where namespaced objects are read.
func TestKubeconfigSelection(t *testing.T) {
	h := newWorkloadHub(t)
	admin, err := clientcmd.LoadFromFile(h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := admin.DeepCopy()
	hubContext := cfg.Contexts[cfg.CurrentContext].DeepCopy()
	hubContext.Namespace = "shop"
	cfg.Contexts["shop"] = hubContext
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: closedServer(t), InsecureSkipTLSVerify: true}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: hubContext.AuthInfo}
	cfg.CurrentContext = "dead"
	multi := filepath.Join(t.TempDir(), "multi")
	if err := clientcmd.WriteToFile(*cfg, multi); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": multi}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string // in stderr; else exit 0
	}{
		{"the current context", env, []string{"get", "clusterbindings"}, "cannot reach the hub at https://127.0.0.1:"},
		{"--context", env, []string{"--context", "shop", "get", "clusterbindings"}, ""},
		{"--kubeconfig over $KUBECONFIG", env, []string{"--kubeconfig", h.Kubeconfig, "get", "clusterbindings"}, ""},
		{"$KUBECONFIG of several files", map[string]string{"KUBECONFIG": multi + string(filepath.ListSeparator) + h.Kubeconfig},
			[]string{"--context", "shop", "get", "clusterbindings"}, ""},
		{"an unknown context", env, []string{"--context", "nope", "get", "clusterbindings"}, `error: loading the kubeconfig: context "nope" does not exist`},
		{"a missing --kubeconfig", env, []string{"--kubeconfig", "missing.yaml", "get", "clusters"}, "error: loading the kubeconfig: stat missing.yaml: no such file or directory"},
		{"no kubeconfig at all", map[string]string{"KUBECONFIG": filepath.Join(t.TempDir(), "none")}, []string{"get", "clusters"},
			"error: no kubeconfig to reach the hub with: give --kubeconfig FILE (the hub writes DATA/admin.kubeconfig) or set $KUBECONFIG\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runEnv(t, tt.env, tt.args...)
			if tt.wantErr == "" {
				wantExit(t, r, 0)
				return
			}
			wantExit(t, r, 1)
			if !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tt.wantErr)
			}
		})
	}
	// The context's namespace, unless -n says otherwise.
	r := runEnv(t, env, "--context", "shop", "get", "bindings")
	wantExit(t, r, 0)
	if !strings.HasPrefix(r.stdout, "NAME ") || !strings.Contains(r.stdout, "nginx-deployment") {
		t.Errorf("bindings of the context's namespace shop:\n%s", r.stdout)
	}
	r = runEnv(t, env, "--context", "shop", "get", "bindings", "-n", "default")
	wantExit(t, r, 0)
	if !strings.Contains(r.stdout, "web-deployment") || strings.Contains(r.stdout, "nginx-deployment") {
		t.Errorf("bindings of -n default:\n%s", r.stdout)
	}
}

// What RBAC refuses is the hub's answer, shown as it gives it; get
// resources leaves out the templates the user may not read.
func TestForbidden(t *testing.T) {
	h := newWorkloadHub(t)
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-cli-test-reader"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"flotilla.io"}, Resources: []string{"clusters", "resourcebindings", "clusterresourcebindings"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flotilla-cli-test-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "reader"}},
	}
	if _, err := h.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = h.Kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	admin, err := clientcmd.LoadFromFile(h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as := admin.DeepCopy()
	for _, user := range as.AuthInfos {
		user.Impersonate = "reader"
	}
	path := filepath.Join(t.TempDir(), "reader")
	if err := clientcmd.WriteToFile(*as, path); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": path}
	var r result
	// RBAC takes a moment to see a new binding.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r = runEnv(t, env, "get", "resources")
		return r.code == 0 && strings.Contains(r.stdout, "Namespace"), nil
	})
	if err != nil {
		t.Fatalf("get resources as reader: %+v", r)
	}
	want := `KIND        NAMESPACE   NAME   READY   AGE
Namespace   -           shop   -       0s
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	for _, w := range []string{
		`warning: deployments.apps "web" is forbidden: User "reader" cannot get resource "deployments" in API group "apps" in the namespace "default"`,
		`warning: deployments.apps "nginx" is forbidden: User "reader" cannot get resource "deployments" in API group "apps" in the namespace "shop"`,
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	h.addCluster(t, healthyCluster())
	r = runEnv(t, env, "cordon", "edge-1")
	wantExit(t, r, 1)
	want = `error: clusters.flotilla.io "edge-1" is forbidden: User "reader" cannot update resource "clusters" in API group "flotilla.io" at the cluster scope` + "\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}
