package bootstraptoken

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	tokenutil "k8s.io/cluster-bootstrap/token/util"
)

// usedError refuses a single-use token that a join has used.
func usedError(t Token) *RefusedError {
	return refused(ReasonUsed, "bootstrap token %s was used by certificate request %s, and a token joins once; create a new one with `flotilla token create`", t.ID, t.UsedBy)
}

// Claim marks single-use token id as used by certificate request, before
// the hub signs that request's certificate, so that no other request
// gets one with it; claiming it again for the same request changes
// nothing. A reusable token is returned unchanged. It returns the token
// and whether it still exists (the hub signs what an approval decided
// even if the token was deleted since). A token used by another request
// is a *RefusedError.
func Claim(ctx context.Context, secrets corev1client.SecretsGetter, id, request string) (Token, bool, error) {
	var t Token
	found := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tok, s, err := lookup(ctx, secrets, id)
		if r, ok := Refused(err); ok && r.Reason == ReasonUnknown {
			found = false
			return nil
		}
		if err != nil {
			return err
		}
		switch t = tok; {
		case t.Reusable || t.UsedBy == request:
			return nil
		case t.UsedBy != "":
			return usedError(t)
		}
		update := s.DeepCopy()
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[UsedByAnnotation] = request
		_, err = secrets.Secrets(Namespace).Update(ctx, update, metav1.UpdateOptions{})
		t.UsedBy = request
		return err
	})
	if _, ok := Refused(err); err != nil && !ok {
		return Token{}, false, fmt.Errorf("mark bootstrap token %s used by %s: %w", id, request, err)
	}
	return t, found, err
}

// Consume deletes a single-use token once the certificate its join was
// for is issued; a reusable token stays. A token already gone is no error.
func Consume(ctx context.Context, secrets corev1client.SecretsGetter, t Token) error {
	if t.Reusable {
		return nil
	}
	err := secrets.Secrets(Namespace).Delete(ctx, tokenutil.BootstrapTokenSecretName(t.ID), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete used bootstrap token %s: %w", t.ID, err)
	}
	return nil
}
