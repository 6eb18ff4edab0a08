package apiserver

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fieldManager owns what the hub installs itself.
const fieldManager = "flotilla-hub"

// InstallRoles creates or updates the ClusterRoles the hub ships.
func InstallRoles(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, role := range ClusterRoles() {
		_, err := client.RbacV1().ClusterRoles().Apply(ctx, role, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("install ClusterRole %s: %w", *role.Name, err)
		}
	}
	return nil
}
