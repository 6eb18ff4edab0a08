package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/crds"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/apiserver"
	"github.com/flotilla-io/flotilla/internal/pki"
	"github.com/flotilla-io/flotilla/store"
)

// testAPI is one embedded API server for the package's tests: starting one
// takes seconds.
var testAPI struct {
	flotilla flotillaclient.Interface
	kube     kubernetes.Interface
	err      error
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	dir, err := os.MkdirTemp("", "flotilla-hub-test")
	if err != nil {
		panic(err)
	}
	s, api, err := startTestAPI(ctx, dir)
	testAPI.err = err
	if err == nil {
		testAPI.kube = kubernetes.NewForConfigOrDie(api.HubConfig)
		testAPI.flotilla = flotillaclient.NewForConfigOrDie(api.HubConfig)
	}
	code := m.Run()
	cancel()
	if api != nil {
		<-api.Done()
	}
	if s != nil {
		s.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func startTestAPI(ctx context.Context, dir string) (*store.Store, *apiserver.Server, error) {
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

// sharedAPI returns the package's API server and deletes every cluster and
// lease at the end of the test.
func sharedAPI(t *testing.T) RegistryAPI {
	t.Helper()
	if testAPI.err != nil {
		t.Fatalf("test API server: %v", testAPI.err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		err := testAPI.flotilla.FlotillaV1alpha1().Clusters().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err == nil {
			err = testAPI.kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil {
			t.Errorf("clean the test API server: %v", err)
		}
	})
	return RegistryAPI{Flotilla: testAPI.flotilla, Kube: testAPI.kube}
}

// eventReasons lists the reasons of the events about a cluster, waiting
// until want are all there (the recorder writes asynchronously).
func eventReasons(t *testing.T, cluster string, want ...string) []string {
	t.Helper()
	var reasons []string
	_ = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := testAPI.kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s", v1alpha1.KindCluster, cluster)})
		if err != nil {
			return false, err
		}
		reasons = reasons[:0]
		for _, ev := range list.Items {
			reasons = append(reasons, ev.Reason)
		}
		for _, w := range want {
			if !slices.Contains(reasons, w) {
				return false, nil
			}
		}
		return true, nil
	})
	return reasons
}
