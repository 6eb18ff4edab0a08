// Package hubclient reads the hub for the tools and end-to-end tests: JSON
// from its Kubernetes API (as admin, with DATA/admin.kubeconfig) or from
// its HTTP address (/debug/stats, /metrics), and server-side apply of
// documents as a GitOps tool would do it.
package hubclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/internal/promcheck"
)

// Client reads and writes one hub.
type Client struct {
	config   *rest.Config
	httpAddr string
	kube     kubernetes.Interface
	dynamic  dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
}

// New is a client of the hub whose admin kubeconfig is kubeconfig and whose
// HTTP address is httpAddr (host:port).
func New(kubeconfig, httpAddr string) (*Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{config: rest.CopyConfig(cfg), httpAddr: httpAddr, kube: kube, dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

// Config is the admin client configuration of the hub's API (a copy).
func (a *Client) Config() *rest.Config { return rest.CopyConfig(a.config) }

// Dynamic is the admin dynamic client of the hub's API.
func (a *Client) Dynamic() dynamic.Interface { return a.dynamic }

// Kube is the admin clientset of the hub's API.
func (a *Client) Kube() kubernetes.Interface { return a.kube }

// Get decodes GET path into v: from the hub's HTTP address for /debug/ and
// /metrics, from its Kubernetes API for everything else.
func (a *Client) Get(ctx context.Context, path string, v any) error {
	if strings.HasPrefix(path, "/debug/") || strings.HasPrefix(path, "/metrics") {
		body, err := a.getHTTP(ctx, path)
		if err != nil {
			return err
		}
		return json.Unmarshal(body, v)
	}
	body, err := a.kube.CoreV1().RESTClient().Get().RequestURI(path).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return json.Unmarshal(body, v)
}

// Metrics reads the hub's /metrics, by family name.
func (a *Client) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	body, err := a.getHTTP(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	return promcheck.Parse(body)
}

// getHTTP reads path from the hub's HTTP address.
func (a *Client) getHTTP(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.httpAddr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return body, nil
}

// appliers is how many server-side applies run at once.
const appliers = 8

// Apply creates the items' namespaces and server-side applies every item
// (field manager flotilla-tools, forced), as a GitOps tool would.
func (a *Client) Apply(ctx context.Context, items []any) error {
	objs := make([]*unstructured.Unstructured, 0, len(items))
	namespaces := map[string]bool{}
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return err
		}
		objs = append(objs, u)
		if ns := u.GetNamespace(); ns != "" {
			namespaces[ns] = true
		}
	}
	for ns := range namespaces {
		_, err := a.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	work := make(chan *unstructured.Unstructured)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range appliers {
		wg.Go(func() {
			for u := range work {
				errs <- a.applyOne(ctx, u)
			}
		})
	}
	for _, u := range objs {
		work <- u
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *Client) applyOne(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
	var r dynamic.ResourceInterface = a.dynamic.Resource(mapping.Resource)
	if ns := u.GetNamespace(); ns != "" {
		r = a.dynamic.Resource(mapping.Resource).Namespace(ns)
	}
	if _, err := r.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "flotilla-tools", Force: true}); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
