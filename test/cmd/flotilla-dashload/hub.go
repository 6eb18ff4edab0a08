package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// measureNamespace holds the ServiceAccount the measurements sign in as.
const measureNamespace = "dashload"

// hubClient talks to the hub's API as its admin, and knows its dashboard.
type hubClient struct {
	kube     kubernetes.Interface
	flotilla flotillaclient.Interface
	httpAddr string
}

func newHubClient(cfg *rest.Config, httpAddr string) (*hubClient, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	fl, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &hubClient{kube: kube, flotilla: fl, httpAddr: httpAddr}, nil
}

// adminToken is a token of ServiceAccount dashload/admin, bound to
// flotilla-admin, as an operator would make one to sign in.
func (h *hubClient) adminToken(ctx context.Context) (string, error) {
	creates := []func() error{
		func() error {
			_, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: measureNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := h.kube.CoreV1().ServiceAccounts(measureNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "admin"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "dashload-admin"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flotilla-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "admin", Namespace: measureNamespace}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range creates {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("sign-in ServiceAccount: %w", err)
		}
	}
	tr, err := h.kube.CoreV1().ServiceAccounts(measureNamespace).CreateToken(ctx, "admin", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/admin: %w", measureNamespace, err)
	}
	return tr.Status.Token, nil
}

// addClusters registers n Clusters without agents, four writers at a time.
func (h *hubClient) addClusters(ctx context.Context, n int, out io.Writer) error {
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range n {
		g.Go(func() error {
			c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("extra-%05d", i)},
				Spec: v1alpha1.ClusterSpec{Zone: fmt.Sprintf("zone-%d", i%5), Region: "eu"}}
			_, err := h.flotilla.FlotillaV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("add cluster %s: %w", c.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	fmt.Fprintf(out, "added %d clusters without agents in %v\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}
