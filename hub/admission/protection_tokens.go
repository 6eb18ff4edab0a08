package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/kubernetes/pkg/apis/core"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/bootstraptoken"
)

// TokensResource is the permission that lets a user manage bootstrap
// tokens: verbs create, update and delete on bootstraptokens.flotilla.io.
// No such kind is served; RBAC grants it like any other resource, and only
// flotilla-admin (everything) holds it among the shipped roles. The tokens
// themselves are Secrets, which flotilla-operator may write anywhere as
// resource templates: without this, an operator could mint a token and
// join a cluster of its choosing.
const TokensResource = "bootstraptokens"

// SetAuthorizer is how the API server gives the plugin its authorizer.
func (p *Protection) SetAuthorizer(a authorizer.Authorizer) { p.authorizer = a }

// ValidateInitialization fails the API server's start when the plugin has
// no authorizer to ask.
func (p *Protection) ValidateInitialization() error {
	if p.authorizer == nil {
		return fmt.Errorf("%s: no authorizer", ProtectionPluginName)
	}
	return nil
}

// tokenRefusal is why a, a write of a bootstrap-token Secret, is refused,
// or "" when its user may manage tokens or a is about something else.
func (p *Protection) tokenRefusal(ctx context.Context, a admission.Attributes, name string) (string, error) {
	if a.GetResource().GroupResource() != secretResource || a.GetNamespace() != bootstraptoken.Namespace || !isTokenSecret(a, name) {
		return "", nil
	}
	verb := strings.ToLower(string(a.GetOperation()))
	decision, _, err := p.authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: a.GetUserInfo(), Verb: verb, APIGroup: v1alpha1.GroupName, Resource: TokensResource, ResourceRequest: true,
	})
	if err != nil {
		return "", fmt.Errorf("authorize %s of bootstrap token %s: %w", verb, name, err)
	}
	if decision == authorizer.DecisionAllow {
		return "", nil
	}
	return fmt.Sprintf("bootstrap tokens let a member cluster join the fleet: only users who may %s %s.%s (flotilla-admin) may %s them",
		verb, TokensResource, v1alpha1.GroupName, verb), nil
}

var secretResource = corev1.SchemeGroupVersion.WithResource("secrets").GroupResource()

// isTokenSecret: the Secret is named or typed as a bootstrap token (the
// objects admission sees are the API server's internal ones).
func isTokenSecret(a admission.Attributes, name string) bool {
	if strings.HasPrefix(name, bootstrapapi.BootstrapTokenSecretPrefix) {
		return true
	}
	for _, obj := range []any{a.GetObject(), a.GetOldObject()} {
		switch s := obj.(type) {
		case *core.Secret:
			if s.Type == core.SecretType(bootstrapapi.SecretTypeBootstrapToken) {
				return true
			}
		case *corev1.Secret:
			if s.Type == bootstrapapi.SecretTypeBootstrapToken {
				return true
			}
		}
	}
	return false
}
