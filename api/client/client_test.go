package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/client/clientset/versioned/fake"
	"github.com/flotilla-io/flotilla/api/client/informers/externalversions"
	"github.com/flotilla-io/flotilla/api/internal/apitest"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// recorder is an API server that answers every write with the object sent
// and records the requests.
type recorder struct {
	mu       sync.Mutex
	requests []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// kindClient is the typed client of one kind, reduced to what the test
// calls; updateStatus is nil when its interface has no UpdateStatus.
type kindClient struct {
	create, updateStatus func(ctx context.Context, obj runtime.Object) error
}

type creator[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

type statusUpdater[T any] interface {
	UpdateStatus(context.Context, T, metav1.UpdateOptions) (T, error)
}

// clientFor wraps the typed client c, whose interface type is I.
func clientFor[T runtime.Object, I creator[T]](c I) kindClient {
	kc := kindClient{create: func(ctx context.Context, o runtime.Object) error {
		_, err := c.Create(ctx, o.(T), metav1.CreateOptions{})
		return err
	}}
	if _, ok := reflect.TypeFor[I]().MethodByName("UpdateStatus"); ok {
		kc.updateStatus = func(ctx context.Context, o runtime.Object) error {
			_, err := any(c).(statusUpdater[T]).UpdateStatus(ctx, o.(T), metav1.UpdateOptions{})
			return err
		}
	}
	return kc
}

func clientOf(cs versioned.Interface, kind, namespace string) kindClient {
	fl, apps := cs.FlotillaV1alpha1(), cs.AppsV1alpha1()
	switch kind {
	case v1alpha1.KindCluster:
		return clientFor[*v1alpha1.Cluster](fl.Clusters())
	case v1alpha1.KindPropagationPolicy:
		return clientFor[*v1alpha1.PropagationPolicy](fl.PropagationPolicies(namespace))
	case v1alpha1.KindClusterPropagationPolicy:
		return clientFor[*v1alpha1.ClusterPropagationPolicy](fl.ClusterPropagationPolicies())
	case v1alpha1.KindResourceBinding:
		return clientFor[*v1alpha1.ResourceBinding](fl.ResourceBindings(namespace))
	case v1alpha1.KindClusterResourceBinding:
		return clientFor[*v1alpha1.ClusterResourceBinding](fl.ClusterResourceBindings())
	case v1alpha1.KindWork:
		return clientFor[*v1alpha1.Work](fl.Works(namespace))
	case v1alpha1.KindPurgeRequest:
		return clientFor[*v1alpha1.PurgeRequest](fl.PurgeRequests())
	case v1alpha1.KindClusterTaintPolicy:
		return clientFor[*v1alpha1.ClusterTaintPolicy](fl.ClusterTaintPolicies())
	case appsv1alpha1.KindWorkloadRebalancer:
		return clientFor[*appsv1alpha1.WorkloadRebalancer](apps.WorkloadRebalancers())
	}
	return kindClient{}
}

// TestClientsetPaths: the typed clients talk to the paths the CRDs serve:
// the CRD's plural, under namespaces/NS/ for namespaced kinds, and the
// status subresource exactly for the kinds that have one.
func TestClientsetPaths(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	for _, k := range apitest.Kinds() {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			obj := k.Filled()
			namespace := obj.(metav1.Object).GetNamespace()
			c := clientOf(cs, k.GVK.Kind, namespace)
			if c.create == nil {
				t.Fatalf("no client for %s", k.GVK.Kind)
			}
			if hasUpdateStatus := c.updateStatus != nil; hasUpdateStatus != k.HasStatus {
				t.Errorf("client has UpdateStatus: %v, want %v", hasUpdateStatus, k.HasStatus)
			}
			base := "/apis/" + k.GVK.Group + "/" + k.GVK.Version + "/"
			if k.Namespaced {
				base += "namespaces/" + namespace + "/"
			}
			base += k.Resource
			want := []string{"POST " + base}
			rec.mu.Lock()
			rec.requests = nil
			rec.mu.Unlock()
			if err := c.create(t.Context(), obj); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if c.updateStatus != nil {
				want = append(want, "PUT "+base+"/"+obj.(metav1.Object).GetName()+"/status")
				if err := c.updateStatus(t.Context(), obj); err != nil {
					t.Fatalf("UpdateStatus: %v", err)
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if diff := cmp.Diff(want, rec.requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInformersAndListers: the informer factory lists and watches through
// the clientset, and the listers read its cache.
func TestInformersAndListers(t *testing.T) {
	cluster := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "member-1"}, Spec: v1alpha1.ClusterSpec{Region: "eu"}}
	work := &v1alpha1.Work{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: v1alpha1.ExecutionNamespace("member-1")}}
	rebalancer := &appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	cs := fake.NewSimpleClientset(cluster, work, rebalancer)
	factory := externalversions.NewSharedInformerFactory(cs, time.Hour)
	clusters := factory.Flotilla().V1alpha1().Clusters().Lister()
	works := factory.Flotilla().V1alpha1().Works().Lister()
	rebalancers := factory.Apps().V1alpha1().WorkloadRebalancers().Lister()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	gotCluster, err := clusters.Get("member-1")
	if err != nil {
		t.Fatalf("cluster lister: %v", err)
	}
	if diff := cmp.Diff(cluster, gotCluster); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	if _, err := works.Works(work.Namespace).Get("w"); err != nil {
		t.Errorf("work lister: %v", err)
	}
	if _, err := rebalancers.Get("demo"); err != nil {
		t.Errorf("rebalancer lister: %v", err)
	}
}
