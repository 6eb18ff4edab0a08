package credstore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/agent/work"
)

// TokenSecret is where the member cluster keeps the bootstrap token the
// agent joins with: key Key of Secret Namespace/Name (the agent chart's
// token Secret, or the one its bootstrapTokenExistingSecret names).
type TokenSecret struct {
	Client               kubernetes.Interface
	Namespace, Name, Key string
}

// Forget empties the token once the agent has stored the certificate it
// joined for: the hub deleted a single-use token when it signed, and the
// member cluster keeps no copy of any token. The key stays, empty, so a
// Pod that mounts it still starts (and, holding a certificate, needs no
// token). It reports whether there was a token to empty; a missing
// Secret or key is none.
func (s TokenSecret) Forget(ctx context.Context) (bool, error) {
	emptied := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(secret.Data[s.Key]) == 0 {
			return nil
		}
		secret.Data[s.Key] = []byte{}
		_, err = s.Client.CoreV1().Secrets(s.Namespace).Update(ctx, secret, metav1.UpdateOptions{FieldManager: work.FieldManager})
		emptied = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("empty the bootstrap token in Secret %s/%s, key %s: %w", s.Namespace, s.Name, s.Key, err)
	}
	return emptied, nil
}
