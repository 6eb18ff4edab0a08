// Package testapi gives a package's tests one embedded Kubernetes API
// server (on embedded etcd) with Flotilla's CRDs installed: starting one
// takes seconds, so a package starts it once in TestMain (Main) and its
// tests share it (Shared), each cleaning up the clusters and leases it
// made.
package testapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/store"
)

// Clients reach the shared API server.
type Clients struct {
	Flotilla flotillaclient.Interface
	Kube     kubernetes.Interface
}

// shared is the package's server, set once by Main before any test runs.
var shared struct {
	clients Clients
	err     error
}

// Main starts the API server, runs the package's tests and exits with
// their result, after stopping the server. Call it from TestMain.
func Main(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	dir, err := os.MkdirTemp("", "flotilla-testapi")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapi:", err)
		os.Exit(1)
	}
	s, api, err := start(ctx, dir)
	shared.err = err
	if err == nil {
		shared.clients = Clients{Flotilla: flotillaclient.NewForConfigOrDie(api.HubConfig), Kube: kubernetes.NewForConfigOrDie(api.HubConfig)}
	}
	code := m.Run()
	cancel()
	if api != nil {
		<-api.Done()
	}
	if s != nil {
		s.Close()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func start(ctx context.Context, dir string) (*store.Store, *apiserver.Server, error) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	apiserver.RouteKlog(logger)
	s, err := store.Open(ctx, store.Config{DataDir: dir, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		return s, nil, err
	}
	api, err := apiserver.Start(ctx, apiserver.Config{DataDir: dir, Addr: "127.0.0.1:0", Etcd: apiserver.EtcdConfig{Servers: s.Endpoints()}, CA: ca, Logger: logger})
	if err != nil {
		return s, nil, err
	}
	all, err := crds.Hub()
	if err == nil {
		err = crds.Install(ctx, api.HubConfig, all)
	}
	return s, api, err
}

// Shared returns clients of the package's API server and deletes every
// cluster and lease at the end of the test.
func Shared(t testing.TB) Clients {
	t.Helper()
	if shared.err != nil {
		t.Fatalf("test API server: %v", shared.err)
	}
	if shared.clients.Kube == nil {
		t.Fatal("test API server: not started (call testapi.Main from TestMain)")
	}
	t.Cleanup(func() {
		ctx := context.Background()
		err := shared.clients.Flotilla.FlotillaV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err == nil {
			err = shared.clients.Kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil {
			t.Errorf("clean the test API server: %v", err)
		}
	})
	return shared.clients
}
