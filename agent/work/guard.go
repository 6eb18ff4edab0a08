package work

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// errNotManaged marks an object the engine must leave alone: it exists but
// does not carry the Work's label (made by hand, or another Work's).
var errNotManaged = errors.New("exists and is not managed by this Work; not touched")

// owned reads ref's object and returns it if it belongs to work, nil if it
// does not exist, and an error wrapping errNotManaged if it is someone
// else's. Every apply, prune and delete goes through it first.
func (e *Engine) owned(ctx context.Context, ref objectRef, work string) (*unstructured.Unstructured, error) {
	obj, err := e.resource(ref).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: get: %w", ref, err)
	case obj.GetLabels()[LabelWork] != work:
		return nil, fmt.Errorf("%s %w", ref, errNotManaged)
	}
	return obj, nil
}
