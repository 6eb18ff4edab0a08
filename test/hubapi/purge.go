package hubapi

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// cleanupTimeout bounds the clean-up at the end of a test.
const cleanupTimeout = 30 * time.Second

// clearFinalizers is a JSON merge patch that removes every finalizer.
var clearFinalizers = []byte(`{"metadata":{"finalizers":null}}`)

// purge deletes every object of the resources in namespace ("" for
// cluster-scoped ones), one goroutine per resource, and returns once none
// is left. Finalizers are cleared and Pods deleted without grace, since
// nothing else would ever remove them.
func (e *Env) purge(ctx context.Context, namespace string, resources []schema.GroupVersionResource) error {
	return eachResource(resources, func(gvr schema.GroupVersionResource) error {
		return e.purgeResource(ctx, namespace, gvr)
	})
}

// purgeResource lists the objects of one resource and clears and deletes
// them until the list is empty (a controller still running may add some).
func (e *Env) purgeResource(ctx context.Context, namespace string, gvr schema.GroupVersionResource) error {
	client := e.cleaner.Resource(gvr).Namespace(namespace)
	var left []string
	err := wait.PollUntilContextTimeout(ctx, pollPeriod, cleanupTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
		}
		left = left[:0]
		for _, obj := range list.Items {
			left = append(left, obj.GetName())
			if len(obj.GetFinalizers()) > 0 {
				_, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, clearFinalizers, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("clear finalizers of %s %s: %w", gvr.GroupResource(), obj.GetName(), err)
				}
			}
			if obj.GetDeletionTimestamp() == nil {
				err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				if err != nil && !apierrors.IsNotFound(err) {
					return false, fmt.Errorf("delete %s %s: %w", gvr.GroupResource(), obj.GetName(), err)
				}
			}
		}
		return len(list.Items) == 0, nil
	})
	if err != nil && len(left) > 0 {
		return fmt.Errorf("%s %v still there: %w", gvr.GroupResource(), left, err)
	}
	return err
}
