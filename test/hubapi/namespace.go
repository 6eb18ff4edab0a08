package hubapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// maxPrefix keeps generated namespace names well within a DNS label.
const maxPrefix = 40

// Namespace creates a namespace with a unique name, made from the test's
// name, and returns the name. When the test ends the namespace is deleted
// with everything in it, the way the namespace controller (which does not
// run here) would: every namespaced object is deleted, finalizers cleared,
// and the namespace is finalized, so it is gone, not left Terminating.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	ns, err := e.Kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("hubapi: create namespace: %v", err)
	}
	t.Cleanup(func() {
		// t.Context() is already canceled when clean-ups run.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := e.deleteNamespace(ctx, ns.Name); err != nil {
			t.Errorf("hubapi: delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// namespacePrefix turns a test name into a GenerateName: lower case, runs of
// other characters as one '-', at most maxPrefix characters.
func namespacePrefix(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	prefix := strings.TrimRight(b.String()[:min(b.Len(), maxPrefix)], "-")
	if prefix == "" {
		prefix = "test"
	}
	return prefix + "-"
}

// deleteNamespace deletes the namespace (from then on the API server admits
// nothing new in it), then every object in it, then finalizes it, and waits
// until it is gone.
func (e *Env) deleteNamespace(ctx context.Context, name string) error {
	namespaces := e.Kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	resources, err := e.namespacedResources()
	if err != nil {
		return err
	}
	if err := e.purge(ctx, name, resources); err != nil {
		return err
	}
	ns, err := namespaces.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ns.Spec.Finalizers = nil
	if _, err := namespaces.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalize: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, pollPeriod, cleanupTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := namespaces.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// namespacedResources lists every namespaced resource the server serves
// (built-in and custom, at its preferred version) that can be listed and
// deleted.
func (e *Env) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := e.Kube.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return nil, fmt.Errorf("discover namespaced resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("discover namespaced resources: %w", err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, nil
}
