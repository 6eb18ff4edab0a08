package crds

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// fieldManager owns what the hub installs.
const fieldManager = "flotilla-hub"

// establishTimeout bounds the wait for new CRDs to be served.
const establishTimeout = time.Minute

// Install creates or updates crds (All, or any others) and waits until each is Established,
// so the hub's informers can start on them at once.
func Install(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if err := upsertCRD(ctx, api, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return established(got), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

type crdAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

// upsertCRD creates crd, or replaces the spec of the one there (a hub of a
// newer version brings newer schemas; labels and annotations are merged).
func upsertCRD(ctx context.Context, api crdAPI, crd *apiextensionsv1.CustomResourceDefinition) error {
	for {
		cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		} else if err == nil {
			next := cur.DeepCopy()
			next.Spec = crd.Spec
			for k, v := range crd.Labels {
				metav1.SetMetaDataLabel(&next.ObjectMeta, k, v)
			}
			for k, v := range crd.Annotations {
				metav1.SetMetaDataAnnotation(&next.ObjectMeta, k, v)
			}
			_, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: fieldManager})
			if apierrors.IsConflict(err) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
		return nil
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
