package work

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EnsureNamespace creates namespace if it does not exist, labelled as the
// agent's. The agent never deletes the namespaces it creates this way:
// other Works and hand-made objects may live there.
func EnsureNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	return ensureNamespace(ctx, client, namespace, nil)
}

// ensureNamespace is EnsureNamespace with extra labels for a namespace it
// creates (the member policy's Pod Security level); an existing namespace
// is left as it is.
func ensureNamespace(ctx context.Context, client kubernetes.Interface, namespace string, extra map[string]string) error {
	_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	labels := map[string]string{LabelManagedBy: ManagedBy}
	maps.Copy(labels, extra)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}
	_, err = client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	return nil
}
