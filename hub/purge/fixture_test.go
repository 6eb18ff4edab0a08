package purge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/controller/controllertest"
	"github.com/flotilla-io/flotilla/internal/kube"
)

// fixture is the test binary's API server with a namespace for the test's
// bindings, and the controller on a fake clock.
type fixture struct {
	*controllertest.Fixture
	clk *clocktesting.FakeClock
	// failStatus, when set, fails the controller's next status write of a
	// PurgeRequest before it reaches the server.
	failStatus chan struct{}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Fixture: controllertest.New(t), failStatus: make(chan struct{}, 1)}
	f.clk = clocktesting.NewFakeClock(f.T0)
	return f
}

// start runs the controller with one worker on informers of its own.
func (f *fixture) start() {
	f.T.Helper()
	f.Start(f.failStatusWrites, 1, func(clients *kube.Clients, informers *controller.Informers) controllertest.Controller {
		c := New(clients, informers, f.Events, f.clk, controllertest.Logger(f.T))
		c.waiting = f.RecordWake
		return c
	})
}

// failStatusWrites fails a status write of a PurgeRequest when failStatus
// is set.
func (f *fixture) failStatusWrites(rt http.RoundTripper) http.RoundTripper {
	return controllertest.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/purgerequests/") && strings.HasSuffix(req.URL.Path, "/status") {
			select {
			case <-f.failStatus:
				if req.Body != nil {
					_, _ = io.Copy(io.Discard, req.Body)
					_ = req.Body.Close()
				}
				return nil, errors.New("injected: connection reset")
			default:
			}
		}
		return rt.RoundTrip(req)
	})
}

// task is an eviction task from cluster.
func task(cluster, purgeMode string) v1alpha1.GracefulEvictionTask {
	return v1alpha1.GracefulEvictionTask{FromCluster: cluster, PurgeMode: purgeMode, Reason: "TaintUntolerated", Producer: "TaintManager",
		SuppressDeletion: ptr.To(purgeMode == v1alpha1.PurgeModeNever)}
}

// binding creates the binding of a Deployment (namespace set) or of a
// ClusterRole (namespace empty) with eviction tasks.
func (f *fixture) binding(namespace, name string, tasks ...v1alpha1.GracefulEvictionTask) {
	f.T.Helper()
	spec := v1alpha1.ResourceBindingSpec{Clusters: []v1alpha1.TargetCluster{{Name: "member-2", Replicas: 3}}, GracefulEvictionTasks: tasks}
	var meta metav1.ObjectMeta
	if namespace == "" {
		meta = metav1.ObjectMeta{Name: name + "-clusterrole"}
		spec.Resource = v1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: name}
	} else {
		meta = metav1.ObjectMeta{Name: name + "-deployment", Namespace: namespace}
		spec.Resource = v1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: namespace, Name: name}
	}
	f.CreateBinding(meta, spec, nil)
}

// tasks reads the eviction tasks of a binding.
func (f *fixture) tasks(namespace, name string) []string {
	f.T.Helper()
	spec, _ := f.BindingSpec(namespace, name)
	return spec.EvictingClusters()
}

// request creates a PurgeRequest.
func (f *fixture) request(name, namespace, binding, cluster string, ttl *int32) {
	f.T.Helper()
	pr := &v1alpha1.PurgeRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PurgeRequestSpec{
		Binding: v1alpha1.BindingReference{Namespace: namespace, Name: binding}, Cluster: cluster, TTLSecondsAfterFinished: ttl}}
	if _, err := f.Flotilla.PurgeRequests().Create(f.T.Context(), pr, metav1.CreateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}

func (f *fixture) get(name string) *v1alpha1.PurgeRequest {
	f.T.Helper()
	pr, err := f.Flotilla.PurgeRequests().Get(f.T.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.T.Fatal(err)
	}
	return pr
}

// answered waits until the request has a result and returns its status.
// Retries wait on the fake clock: if a try fails, the clock is nudged.
func (f *fixture) answered(name string) v1alpha1.PurgeRequestStatus {
	f.T.Helper()
	var pr *v1alpha1.PurgeRequest
	err := controllertest.PollNudgingClock(f.T.Context(), f.clk, func(context.Context) bool {
		pr = f.get(name)
		return pr != nil && pr.Status.Result != ""
	})
	if err != nil {
		f.T.Fatalf("waiting for purge request %s to be answered: %v; last seen %+v", name, err, pr)
	}
	return pr.Status
}

// edit changes a request's spec (and a label, so that even an unchanged
// spec makes a new version the controller looks at).
func (f *fixture) edit(name string, change func(*v1alpha1.PurgeRequest)) {
	f.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pr := f.get(name)
		if pr == nil {
			return apierrors.NewNotFound(v1alpha1.Resource("purgerequests"), name)
		}
		if pr.Labels == nil {
			pr.Labels = map[string]string{}
		}
		pr.Labels["edit"] = fmt.Sprint(time.Now().UnixNano())
		change(pr)
		_, err := f.Flotilla.PurgeRequests().Update(f.T.Context(), pr, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatalf("edit purge request %s: %v", name, err)
	}
}

// awaitGone waits until the request is deleted.
func (f *fixture) awaitGone(name string) {
	f.T.Helper()
	err := controllertest.PollNudgingClock(f.T.Context(), f.clk, func(context.Context) bool { return f.get(name) == nil })
	if err != nil {
		f.T.Fatalf("waiting for purge request %s to be deleted: %v", name, err)
	}
}
