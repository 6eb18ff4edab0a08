package work

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-io/flotilla/internal/crdstate"
)

// A CRD is usually established and served within a second of its creation.
const (
	crdTimeout = 30 * time.Second
	crdPoll    = 100 * time.Millisecond
)

// waitForCRDs waits until every CRD applied among ordinals is established
// and its kind is served, so that custom resources later in the Work can be
// mapped. A CRD that does not get there fails.
func (a *applyRun) waitForCRDs(ordinals []int) {
	for _, i := range ordinals {
		if a.failed[i] || kindOf(a.manifests[i]) != crdKind {
			continue
		}
		if err := a.e.waitServed(a.op.ctx, *a.refs[i]); err != nil {
			a.fail(i, fmt.Errorf("%s: %w", a.refs[i], err))
		}
	}
}

// waitServed polls the CRD until it is Established and the mapper, read
// again from discovery, knows its kind. It is a short, bounded wait inside
// one apply: a watch would cost more than it saves.
func (e *Engine) waitServed(ctx context.Context, crd objectRef) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, crdPoll, crdTimeout, true, func(ctx context.Context) (bool, error) {
		obj, err := e.resource(crd).Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if !crdstate.Established(obj) {
			last = errors.New("not Established")
			return false, nil
		}
		_, err = e.mapper.RESTMapping(crdstate.Kind(obj))
		if meta.IsNoMatchError(err) {
			e.mapper.Reset()
			last = err
			return false, nil
		}
		return err == nil, err
	})
	switch {
	case err == nil || ctx.Err() != nil:
		return ctx.Err()
	case last != nil:
		return fmt.Errorf("not served within %v: %w", crdTimeout, last)
	}
	return err
}
