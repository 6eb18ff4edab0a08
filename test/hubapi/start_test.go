package hubapi

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

func TestStartSharesOneServer(t *testing.T) {
	env := Start(t)
	if again := Start(t); again != env {
		t.Fatalf("second Start returned another Env: %s, first %s", again.Server, env.Server)
	}
	info, err := env.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != "v1.37.2" {
		t.Errorf("GitVersion = %q, want v1.37.2", info.GitVersion)
	}
	cfg := env.RESTConfig()
	if cfg.QPS != clientQPS || cfg.Burst != clientBurst {
		t.Errorf("QPS, Burst = %v, %d; want %v, %d", cfg.QPS, cfg.Burst, float32(clientQPS), clientBurst)
	}
	cfg.QPS = 1
	if env.RESTConfig().QPS != clientQPS {
		t.Error("changing a RESTConfig changed the shared one")
	}
}

func TestKubeconfigIsAdmin(t *testing.T) {
	env := Start(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != env.Server {
		t.Errorf("kubeconfig server %q, want %q", cfg.Host, env.Server)
	}
	client := versioned.NewForConfigOrDie(cfg)
	if _, err := client.FlotillaV1alpha1().Clusters().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Errorf("list clusters with the kubeconfig: %v", err)
	}
}

func TestRBACIsEnforced(t *testing.T) {
	env := Start(t)
	client := versioned.NewForConfigOrDie(env.AsUser("alice", "developers"))
	_, err := client.FlotillaV1alpha1().Clusters().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list clusters as an unbound user: err = %v, want Forbidden", err)
	}
	anonymous := env.RESTConfig()
	anonymous.TLSClientConfig.CertData, anonymous.TLSClientConfig.KeyData = nil, nil
	_, err = kubernetes.NewForConfigOrDie(anonymous).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("list namespaces without a client certificate: err = %v, want Unauthorized", err)
	}
}

func TestStartWithoutMainFails(t *testing.T) {
	var s sharedEnv
	_, _, err := s.get()
	if err == nil || !strings.Contains(err.Error(), "hubapi.Main") {
		t.Errorf("get without Main: err = %v, want one that names hubapi.Main", err)
	}
}

func TestStartWithoutBinariesSaysMakeTestbin(t *testing.T) {
	t.Setenv(membercluster.BinDirEnv, t.TempDir())
	env, err := start(t.Context(), "")
	if err == nil {
		env.stop()
		t.Fatal("start succeeded without binaries")
	}
	if !strings.Contains(err.Error(), "run `make testbin`") {
		t.Errorf("error %q does not say to run make testbin", err)
	}
}
