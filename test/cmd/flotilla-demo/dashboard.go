package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-io/flotilla/hub/apiserver"
)

// The dashboard's demo user: a ServiceAccount bound to flotilla-operator,
// as docs/operations.md ("The dashboard") has users make one.
const (
	dashboardNamespace = "dashboard-users"
	dashboardUser      = "demo-operator"
	dashboardTokenTTL  = 24 * time.Hour
)

// dashboardToken makes the demo user in the hub's API and returns a token
// for it (TokenRequest), waiting up to a minute for the hub to serve.
func dashboardToken(ctx context.Context, kubeconfig string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		token, err := tryDashboardToken(ctx, kubeconfig)
		if err == nil {
			return token, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("a dashboard token from the hub: %w (last: %v)", ctx.Err(), lastErr)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func tryDashboardToken(ctx context.Context, kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err // not written yet: the hub is starting
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dashboardNamespace}}, metav1.CreateOptions{}); create(err) != nil {
		return "", fmt.Errorf("namespace %s: %w", dashboardNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: dashboardUser, Namespace: dashboardNamespace}}
	if _, err := kube.CoreV1().ServiceAccounts(dashboardNamespace).Create(ctx, sa, metav1.CreateOptions{}); create(err) != nil {
		return "", fmt.Errorf("service account %s/%s: %w", dashboardNamespace, dashboardUser, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: dashboardUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: apiserver.OperatorRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dashboardUser, Namespace: dashboardNamespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); create(err) != nil {
		return "", fmt.Errorf("cluster role binding %s: %w", dashboardUser, err)
	}
	ttl := int64(dashboardTokenTTL / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(dashboardNamespace).CreateToken(ctx, dashboardUser,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", dashboardNamespace, dashboardUser, err)
	}
	return tr.Status.Token, nil
}

// announceDashboard prints the dashboard's address and the token to sign
// in with, framed so it stands out of the logs, and keeps the token in
// DIR/dashboard-token.
func announceDashboard(dir, httpAddr, token string) error {
	path := filepath.Join(dir, "dashboard-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	rule := strings.Repeat("=", 78)
	fmt.Printf("\n%s\n"+
		"  Watch the failover in a browser:  http://%s/\n"+
		"  Sign in with this token (ServiceAccount %s/%s, ClusterRole %s, valid %v;\n"+
		"  also in %s):\n\n%s\n%s\n",
		rule, httpAddr, dashboardNamespace, dashboardUser, apiserver.OperatorRole, dashboardTokenTTL, path, token, rule)
	return nil
}
