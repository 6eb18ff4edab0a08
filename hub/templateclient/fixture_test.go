package templateclient

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// timeout bounds every wait on the API server.
const timeout = 30 * time.Second

var deploymentKind = schema.GroupKind{Group: "apps", Kind: "Deployment"}

// fixture is the test binary's API server with the clients a Writer uses.
type fixture struct {
	env     *hubapi.Env
	clients *kube.Clients
	crds    apiextensionsclient.Interface
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	clients, err := kube.NewClients(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds, err := apiextensionsclient.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{env: env, clients: clients, crds: crds}
}

func deployment(namespace, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
}

// widgetCRD defines the namespaced kind Widget of a group unique to the
// test, served at v1; deleted at test end, and gone from discovery before
// the next test's namespace clean-up lists the resources it names.
func (f *fixture) widgetCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	group := fmt.Sprintf("t%s.example.com", rand.String(6))
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	api := f.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := api.Create(t.Context(), crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := api.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", crd.Name, err)
			return
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			if _, err := api.Get(ctx, crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err := f.env.Kube.Discovery().ServerResourcesForGroupVersion(group + "/v1")
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("CRD %s still served: %v", crd.Name, err)
		}
	})
	return crd
}

// createWidget creates a Widget, waiting out the API server's start of a
// new CRD (creates are refused, then held, for a moment).
func (f *fixture) createWidget(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, namespace, name string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: "v1", Resource: crd.Spec.Names.Plural}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.Spec.Group + "/v1", "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{"namespace": namespace, "name": name},
	}}
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := f.env.Dynamic.Resource(gvr).Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create %s %s: %v", crd.Spec.Names.Kind, name, err)
	}
}
