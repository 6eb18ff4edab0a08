package hubapi

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/api/crds"
)

// createHold is how long kube-apiserver holds every create of a custom
// resource after its CRD became Established, so that in an HA control plane
// every server has seen the CRD first (apiextensions-apiserver's
// customresource_handler.go). Its clock is the Established condition's
// lastTransitionTime, stored to the second.
const createHold = 2 * time.Second

// installCRDs installs Flotilla's CRDs, waits until they are Established,
// and backdates their Established condition past createHold: a test server
// has no other server to wait for, and the first test to create an object
// would otherwise pay the two seconds. (The server's CRD informer sees the
// change within milliseconds; a create that beats it is only held as
// before.)
func installCRDs(ctx context.Context, cfg *rest.Config, all []*apiextensionsv1.CustomResourceDefinition) error {
	if err := crds.Install(ctx, cfg, all); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range all {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i, c := range cur.Status.Conditions {
				if c.Type == apiextensionsv1.Established {
					cur.Status.Conditions[i].LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(-2 * createHold))
				}
			}
			_, err = api.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("backdate CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}

// warmUp lists every custom resource once. The API server creates the
// storage and watch cache of a custom resource on its first request, and
// answers lists with 429 Too Many Requests, Retry-After 1 s, until the
// cache is ready, which client-go waits out. Polling here without retries
// takes milliseconds and keeps that second out of the tests.
func (e *Env) warmUp(ctx context.Context, resources []schema.GroupVersionResource) error {
	client := e.Kube.Discovery().RESTClient()
	return eachResource(resources, func(gvr schema.GroupVersionResource) error {
		path := "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
		err := wait.PollUntilContextTimeout(ctx, pollPeriod, startTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := client.Get().AbsPath(path).MaxRetries(0).DoRaw(ctx)
			if apierrors.IsTooManyRequests(err) {
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
		return nil
	})
}
