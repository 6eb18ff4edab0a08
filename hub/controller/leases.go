package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// LastRenewal reads a cluster's Lease from the hub's API: when the hub
// last stamped a renewal of it, and the lease duration the agent asked
// for. Both are zero when the cluster has no Lease or no renewal yet.
func LastRenewal(ctx context.Context, kube kubernetes.Interface, cluster string) (time.Time, time.Duration, error) {
	l, err := kube.CoordinationV1().Leases(v1alpha1.LeaseNamespace).Get(ctx, cluster, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return time.Time{}, 0, nil
	case err != nil:
		return time.Time{}, 0, fmt.Errorf("read the lease of cluster %s: %w", cluster, err)
	case l.Spec.RenewTime == nil:
		return time.Time{}, 0, nil
	}
	var duration time.Duration
	if l.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return l.Spec.RenewTime.Time, duration, nil
}
