package bootstraptoken

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	tokenutil "k8s.io/cluster-bootstrap/token/util"
)

// Reasons a join's token is refused. They go back to the agent and into
// the hub's log and events as they are.
const (
	ReasonMalformed     = "TokenMalformed"
	ReasonUnknown       = "TokenUnknown"
	ReasonExpired       = "TokenExpired"
	ReasonNotForJoining = "TokenNotForJoining"
	ReasonOtherCluster  = "TokenForAnotherCluster"
	ReasonUsed          = "TokenUsed"
)

// RefusedError is a token a join may not use, with the reason and a
// message that says what to do.
type RefusedError struct {
	Reason  string
	Message string
}

func (e *RefusedError) Error() string { return e.Reason + ": " + e.Message }

func refused(reason, format string, args ...any) *RefusedError {
	return &RefusedError{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Refused returns the refusal in err's chain, if any.
func Refused(err error) (*RefusedError, bool) {
	var r *RefusedError
	ok := errors.As(err, &r)
	return r, ok
}

// Authenticate checks a presented token for a join of cluster at now: its
// Secret must exist, be well formed, hold the same secret, be unexpired,
// be meant for authentication, and (if bound) name this cluster. It
// returns the token and its Secret (whose resourceVersion a binding write
// can use as a precondition). A refusal is a *RefusedError; other errors
// are the API's.
func Authenticate(ctx context.Context, secrets corev1client.SecretsGetter, presented, cluster string, now time.Time) (Token, *corev1.Secret, error) {
	id, secret, err := splitToken(presented)
	if err != nil {
		return Token{}, nil, refused(ReasonMalformed, "the bootstrap token is not of the form [a-z0-9]{6}.[a-z0-9]{16}; copy it again from `flotilla token create`")
	}
	t, s, err := lookup(ctx, secrets, id)
	if err != nil {
		return Token{}, nil, err
	}
	// The same answer as an unknown token: a wrong secret must not tell a
	// guesser that the ID exists.
	if subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) != 1 {
		return Token{}, nil, unknown(id)
	}
	if err := usable(t, s, cluster, now); err != nil {
		return Token{}, nil, err
	}
	return t, s, nil
}

// Check is Authenticate by token ID, for a decision made after the join
// proved the secret (the approval of its certificate request): the token
// must still exist and be usable by cluster at now.
func Check(ctx context.Context, secrets corev1client.SecretsGetter, id, cluster string, now time.Time) (Token, error) {
	if !tokenutil.IsValidBootstrapTokenID(id) {
		return Token{}, refused(ReasonMalformed, "token ID %q is not of the form [a-z0-9]{6}", id)
	}
	t, s, err := lookup(ctx, secrets, id)
	if err != nil {
		return Token{}, err
	}
	return t, usable(t, s, cluster, now)
}

func unknown(id string) *RefusedError {
	return refused(ReasonUnknown, "bootstrap token %s does not exist on the hub (deleted, or never made there); create one with `flotilla token create`", id)
}

// lookup reads token id's Secret.
func lookup(ctx context.Context, secrets corev1client.SecretsGetter, id string) (Token, *corev1.Secret, error) {
	s, err := secrets.Secrets(Namespace).Get(ctx, tokenutil.BootstrapTokenSecretName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Token{}, nil, unknown(id)
	}
	if err != nil {
		return Token{}, nil, fmt.Errorf("read bootstrap token %s: %w", id, err)
	}
	t, err := FromSecret(s)
	if err != nil {
		return Token{}, nil, refused(ReasonMalformed, "bootstrap token %s is stored malformed on the hub: %v", id, err)
	}
	return t, s, nil
}

// usable refuses an expired token, one not meant for authentication, one
// bound to another cluster, or a single-use token already used.
func usable(t Token, s *corev1.Secret, cluster string, now time.Time) error {
	switch {
	case t.UsedBy != "":
		return usedError(t)
	case t.Expired(now):
		return refused(ReasonExpired, "bootstrap token %s expired at %s; create a new one with `flotilla token create`", t.ID, t.Expires.Format(time.RFC3339))
	case string(s.Data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true":
		return refused(ReasonNotForJoining, "bootstrap token %s lacks %s: \"true\", so it is not meant for joining", t.ID, bootstrapapi.BootstrapTokenUsageAuthentication)
	case t.Cluster != "" && t.Cluster != cluster:
		return refused(ReasonOtherCluster, "bootstrap token %s joins only cluster %q, not %q", t.ID, t.Cluster, cluster)
	}
	return nil
}

// Bind binds a single-use token that is bound to no cluster to cluster,
// at its first join, so it cannot join under another name while that
// join waits for its certificate. s is the Secret Authenticate returned:
// its resourceVersion guards against a second join binding it meanwhile,
// whose name then wins. A reusable token stays unbound.
func Bind(ctx context.Context, secrets corev1client.SecretsGetter, s *corev1.Secret, cluster string) error {
	if s.Labels[ClusterLabel] == cluster || s.Labels[UseLabel] == UseReusable {
		return nil
	}
	update := s.DeepCopy()
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	update.Labels[ClusterLabel] = cluster
	_, err := secrets.Secrets(Namespace).Update(ctx, update, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		fresh, err := secrets.Secrets(Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("bind bootstrap token %s to %s: %w", s.Name, cluster, err)
		}
		if bound := fresh.Labels[ClusterLabel]; bound != "" {
			if bound == cluster {
				return nil
			}
			return refused(ReasonOtherCluster, "bootstrap token %s was just used to join cluster %q, and joins only that one", s.Data[bootstrapapi.BootstrapTokenIDKey], bound)
		}
		return Bind(ctx, secrets, fresh, cluster)
	}
	if err != nil {
		return fmt.Errorf("bind bootstrap token %s to %s: %w", s.Name, cluster, err)
	}
	return nil
}
