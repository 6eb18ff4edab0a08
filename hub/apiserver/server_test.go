package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/store"
)

// testServer is one API server for the whole test binary: starting one
// takes seconds.
type testServer struct {
	*Server
	dataDir  string
	auditLog string
	ca       *pki.CA
	started  time.Duration
}

var shared struct {
	server *testServer
	err    error
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	dir, err := os.MkdirTemp("", "flotilla-apiserver-test")
	if err != nil {
		panic(err)
	}
	var s *store.Store
	shared.server, s, shared.err = startTestServer(ctx, dir)
	code := m.Run()
	cancel()
	if shared.server != nil {
		<-shared.server.Done()
	}
	if s != nil {
		s.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func startTestServer(ctx context.Context, dir string) (*testServer, *store.Store, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	RouteKlog(logger)
	s, err := store.Open(ctx, store.Config{DataDir: dir, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		return nil, s, err
	}
	audit := filepath.Join(dir, "audit.log")
	begin := time.Now()
	server, err := Start(ctx, Config{
		DataDir: dir, Addr: "127.0.0.1:0", Etcd: EtcdConfig{Servers: s.Endpoints()}, CA: ca,
		AuditLogPath: audit, Logger: logger,
	})
	if err != nil {
		return nil, s, err
	}
	return &testServer{Server: server, dataDir: dir, auditLog: audit, ca: ca, started: time.Since(begin)}, s, nil
}

func server(t *testing.T) *testServer {
	t.Helper()
	if shared.err != nil {
		t.Fatalf("start API server: %v", shared.err)
	}
	return shared.server
}

func TestStartReportsTime(t *testing.T) {
	s := server(t)
	t.Logf("API server ready %v after Start (etcd already running)", s.started.Round(time.Millisecond))
}

func TestVersionNamesKubernetesAndFlotilla(t *testing.T) {
	s := server(t)
	client := kubernetes.NewForConfigOrDie(s.HubConfig)
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.GitVersion, "v1.37.2+flotilla.") || info.Major != "1" || info.Minor != "37" {
		t.Errorf("/version = %+v, want gitVersion v1.37.2+flotilla.VERSION, major 1, minor 37", info)
	}
}

func TestAnonymousRequestsAreRefused(t *testing.T) {
	s := server(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPoolOf(t, s.ca)}}}
	for _, path := range []string{"/api/v1/namespaces", "/version", "/apis"} {
		resp, err := client.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s: %s, want 401", path, resp.Status)
		}
	}
}

func TestAdminKubeconfig(t *testing.T) {
	s := server(t)
	st, err := os.Stat(s.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || filepath.Dir(s.AdminKubeconfig) != s.dataDir {
		t.Errorf("%s: mode %v, want 0600 in the data directory", s.AdminKubeconfig, st.Mode().Perm())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("admin kubeconfig cannot read namespace default: %v", err)
	}
}

func TestShippedRolesAuthorize(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	if err := InstallRoles(ctx, s.HubConfig); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(s.HubConfig)
	for user, role := range map[string]string{"vera": ViewerRole, "otto": OperatorRole} {
		bind(t, admin, user, role)
	}
	cm := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "default"}}}
	}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	tests := []struct {
		user      string
		forbidden bool
	}{
		{user: "vera", forbidden: true},
		{user: "otto"},
	}
	for _, tt := range tests {
		client := dynamic.NewForConfigOrDie(userConfig(t, s, tt.user))
		// Retry while the RBAC authorizer's cache catches up with the binding.
		var err error
		_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = client.Resource(configMaps).Namespace("default").Create(ctx, cm("by-"+tt.user), metav1.CreateOptions{})
			return apierrors.IsForbidden(err) == tt.forbidden, nil
		})
		if got := apierrors.IsForbidden(err); got != tt.forbidden || (!tt.forbidden && err != nil) {
			t.Errorf("%s creates a ConfigMap: %v, want forbidden %v", tt.user, err, tt.forbidden)
		}
	}
	if err := waitForAudit(t, s, "otto", "create", "configmaps"); err != nil {
		t.Error(err)
	}
}

func TestCRDsInstallWaitsForEstablished(t *testing.T) {
	s := server(t)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.test.flotilla.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "test.flotilla.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true)}},
			}},
		},
	}
	ctx := context.Background()
	for range 2 { // the second install updates in place
		if err := crds.Install(ctx, s.HubConfig, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
			t.Fatal(err)
		}
	}
	client := dynamic.NewForConfigOrDie(s.HubConfig)
	gvr := schema.GroupVersionResource{Group: "test.flotilla.io", Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.flotilla.io/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
	if _, err := client.Resource(gvr).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Errorf("create a Widget right after InstallCRDs: %v", err)
	}
}

func bind(t *testing.T, client kubernetes.Interface, user, role string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(context.Background(), b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// userConfig is a client authenticated as user by a certificate of the CA.
func userConfig(t *testing.T, s *testServer, user string) *rest.Config {
	t.Helper()
	kp, err := s.ca.Issue(pki.Request{CommonName: user, Usage: pki.ClientAuth, ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return clientConfig(s.URL, s.ca.CertPEM(), kp.CertPEM, kp.KeyPEM)
}

// waitForAudit finds the audit event of user's verb on resource; the log
// is written asynchronously.
func waitForAudit(t *testing.T, s *testServer, user, verb, resource string) error {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		f, err := os.Open(s.auditLog)
		if err != nil {
			return false, nil
		}
		defer f.Close()
		seen = seen[:0]
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Verb      string `json:"verb"`
				User      struct{ Username string }
				ObjectRef struct{ Resource string }
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			seen = append(seen, ev.User.Username+" "+ev.Verb+" "+ev.ObjectRef.Resource)
			if ev.User.Username == user && ev.Verb == verb && ev.ObjectRef.Resource == resource {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return errors.New("audit log has no " + user + " " + verb + " " + resource + "; it has " + strings.Join(seen, ", "))
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func caPoolOf(t *testing.T, ca *pki.CA) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}
