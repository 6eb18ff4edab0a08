package bootstrap

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
	s, err := secrets.Secrets(Namespace).Get(ctx, tokenutil.BootstrapTokenSecretName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Token{}, nil, refused(ReasonUnknown, "bootstrap token %s does not exist on the hub (deleted, or never made there); create one with `flotilla token create`", id)
	}
	if err != nil {
		return Token{}, nil, fmt.Errorf("read bootstrap token %s: %w", id, err)
	}
	t, err := FromSecret(s)
	if err != nil {
		return Token{}, nil, refused(ReasonMalformed, "bootstrap token %s is stored malformed on the hub: %v", id, err)
	}
	// The same answer as an unknown token: a wrong secret must not tell a
	// guesser that the ID exists.
	if subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) != 1 {
		return Token{}, nil, refused(ReasonUnknown, "bootstrap token %s does not exist on the hub (deleted, or never made there); create one with `flotilla token create`", id)
	}
	if t.Expired(now) {
		return Token{}, nil, refused(ReasonExpired, "bootstrap token %s expired at %s; create a new one with `flotilla token create`", id, t.Expires.Format(time.RFC3339))
	}
	if string(s.Data[bootstrapapi.BootstrapTokenUsageAuthentication]) != "true" {
		return Token{}, nil, refused(ReasonNotForJoining, "bootstrap token %s lacks %s: \"true\", so it is not meant for joining", id, bootstrapapi.BootstrapTokenUsageAuthentication)
	}
	if t.Cluster != "" && t.Cluster != cluster {
		return Token{}, nil, refused(ReasonOtherCluster, "bootstrap token %s joins only cluster %q, not %q", id, t.Cluster, cluster)
	}
	return t, s, nil
}
