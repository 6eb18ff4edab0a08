// Package podlabel marks the pod of the leading hub replica in the
// Kubernetes cluster the hub runs in (label flotilla.io/hub-leader=true),
// so that the Service agents dial selects the leader alone while every
// replica stays Ready (a StatefulSet rolls replicas only while they are
// Ready, and a standby that is never Ready would stop every rollout).
package podlabel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Label is the label a leading replica's pod carries.
const Label = "flotilla.io/hub-leader"

// Labeler keeps Label on one pod as the hub wants it: Want says whether
// this replica leads, Run applies the newest wish (one goroutine owns the
// pod's label, so a late "standing by" never overwrites "leading").
type Labeler struct {
	pods      kubernetes.Interface
	namespace string
	name      string
	log       *slog.Logger

	wanted  atomic.Bool
	changed chan struct{}
}

// New labels the pod namespace/name through client.
func New(client kubernetes.Interface, namespace, name string, logger *slog.Logger) *Labeler {
	return &Labeler{pods: client, namespace: namespace, name: name, log: logger.With("pod", namespace+"/"+name, "label", Label),
		changed: make(chan struct{}, 1)}
}

// InCluster labels this process's own pod: POD_NAMESPACE and POD_NAME
// (from the downward API) name it, the pod's ServiceAccount token reaches
// its cluster's API.
func InCluster(logger *slog.Logger) (*Labeler, error) {
	namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if namespace == "" || name == "" {
		return nil, errors.New("labelling the leader's pod needs POD_NAMESPACE and POD_NAME (the downward API's metadata.namespace and metadata.name)")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("labelling the leader's pod: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("labelling the leader's pod: %w", err)
	}
	return New(client, namespace, name, logger), nil
}

// Want records whether this replica leads; Run labels the pod so.
func (l *Labeler) Want(leading bool) {
	l.wanted.Store(leading)
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Run labels the pod as Want last said, at once (a restarted replica takes
// off the label its previous life left) and after every change, retrying
// with backoff, until ctx ends; then it takes the label off (within
// removeTimeout) if it had put it on.
func (l *Labeler) Run(ctx context.Context) {
	labelled := true // unknown: make sure
	apply := func(ctx context.Context) {
		want := l.wanted.Load()
		if err := l.set(ctx, want); err == nil {
			labelled = want
		}
	}
	apply(ctx)
	for {
		select {
		case <-ctx.Done():
			l.wanted.Store(false)
			if labelled {
				stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
				_ = l.set(stopCtx, false)
				cancel()
			}
			return
		case <-l.changed:
			apply(ctx)
		}
	}
}

// removeTimeout bounds the last removal of the label on the way out.
const removeTimeout = 5 * time.Second

// set puts the label on the pod (leading) or takes it off, retrying with
// backoff until it succeeds, ctx ends or the wish changes.
func (l *Labeler) set(ctx context.Context, leading bool) error {
	var value any // null removes the label in a merge patch
	if leading {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{Label: value}}})
	if err != nil {
		return err
	}
	var last error
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Second}
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if l.wanted.Load() != leading {
			return false, errSuperseded
		}
		_, last = l.pods.CoreV1().Pods(l.namespace).Patch(ctx, l.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "flotilla-hub"})
		if last != nil {
			l.log.Warn("cannot label the hub's pod; retrying", "leading", leading, "err", last)
		}
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w (last: %w)", err, last)
		}
		return fmt.Errorf("label pod %s/%s %s=%v: %w", l.namespace, l.name, Label, leading, err)
	}
	l.log.Info("labelled the hub's pod", "leading", leading)
	return nil
}

// errSuperseded stops retrying a label the hub no longer wants.
var errSuperseded = errors.New("superseded by a newer wish")
