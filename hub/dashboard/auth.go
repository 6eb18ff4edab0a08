package dashboard

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Identity is who a token belongs to, as the hub's API authenticated it.
type Identity struct {
	User   string              `json:"user"`
	UID    string              `json:"-"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"-"`
}

// Access is one question for SubjectAccessReview: may the user do Verb on
// Resource of Group (in Namespace, "" for all or cluster-scoped)?
type Access struct {
	Verb, Group, Resource, Namespace string
}

// ErrUnauthenticated is returned for a token the hub's API does not accept.
var ErrUnauthenticated = errors.New("token not accepted by the hub's API")

// maxCached bounds the cache: past it, expired entries are dropped, and if
// none are, everything is (a flood of tokens must not grow the hub).
const maxCached = 10000

// authCache answers who a token is (TokenReview) and what it may do
// (SubjectAccessReview) through the hub's API, remembering each answer for
// ttl, keyed by the token's SHA-256 (the token itself is not kept).
type authCache struct {
	kube  kubernetes.Interface
	ttl   time.Duration
	clock clock.PassiveClock
	limit *signInLimiter

	mu      sync.Mutex
	idents  map[[32]byte]identEntry
	answers map[answerKey]answerEntry
}

type identEntry struct {
	id      Identity
	err     error
	expires time.Time
}

type answerKey struct {
	token  [32]byte
	access Access
}

type answerEntry struct {
	allowed bool
	expires time.Time
}

func newAuthCache(kube kubernetes.Interface, ttl time.Duration, clk clock.PassiveClock) *authCache {
	return &authCache{kube: kube, ttl: ttl, clock: clk, limit: newSignInLimiter(clk), idents: map[[32]byte]identEntry{}, answers: map[answerKey]answerEntry{}}
}

// authenticate returns the identity of token, presented from src. A
// refused token is remembered too, so that a page retrying with it does
// not make a TokenReview each time; errors reaching the API are not. A
// token not remembered costs src an attempt of its sign-in budget, given
// back unless the token is refused; with none left, the answer is
// *ErrSignInLimited and no TokenReview is made.
func (a *authCache) authenticate(ctx context.Context, token string, src netip.Prefix) (Identity, error) {
	if token == "" {
		return Identity{}, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	key := sha256.Sum256([]byte(token))
	now := a.clock.Now()
	a.mu.Lock()
	e, ok := a.idents[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.id, e.err
	}
	if ok, wait := a.limit.take(src); !ok {
		return Identity{}, &ErrSignInLimited{Source: src, Wait: wait}
	}
	review, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		a.limit.giveBack(src) // not the token's fault
		return Identity{}, fmt.Errorf("token review: %w", err)
	}
	if review.Status.Authenticated {
		a.limit.giveBack(src)
	} else {
		a.limit.failed.Add(1)
	}
	var id Identity
	var refused error
	if !review.Status.Authenticated {
		reason := review.Status.Error
		if reason == "" {
			reason = "not authenticated"
		}
		refused = fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
	} else {
		u := review.Status.User
		id = Identity{User: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			id.Extra = map[string][]string{}
			for k, v := range u.Extra {
				id.Extra[k] = v
			}
		}
	}
	a.mu.Lock()
	a.pruneLocked(now, len(a.idents))
	a.idents[key] = identEntry{id: id, err: refused, expires: now.Add(a.ttl)}
	a.mu.Unlock()
	return id, refused
}

// allowed says whether the token's user may perform access.
func (a *authCache) allowed(ctx context.Context, token string, id Identity, access Access) (bool, error) {
	key := answerKey{token: sha256.Sum256([]byte(token)), access: access}
	now := a.clock.Now()
	a.mu.Lock()
	e, ok := a.answers[key]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.allowed, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range id.Extra {
		extra[k] = v
	}
	review, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.User, UID: id.UID, Groups: id.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: access.Verb, Group: access.Group, Resource: access.Resource, Namespace: access.Namespace},
		}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("access review (%s %s): %w", access.Verb, resourceName(access), err)
	}
	a.mu.Lock()
	a.pruneLocked(now, len(a.answers))
	a.answers[key] = answerEntry{allowed: review.Status.Allowed, expires: now.Add(a.ttl)}
	a.mu.Unlock()
	return review.Status.Allowed, nil
}

// pruneLocked drops expired entries once a map reaches maxCached, and
// everything if that freed nothing.
func (a *authCache) pruneLocked(now time.Time, size int) {
	if size < maxCached {
		return
	}
	for k, e := range a.idents {
		if !now.Before(e.expires) {
			delete(a.idents, k)
		}
	}
	for k, e := range a.answers {
		if !now.Before(e.expires) {
			delete(a.answers, k)
		}
	}
	if len(a.idents) >= maxCached {
		a.idents = map[[32]byte]identEntry{}
	}
	if len(a.answers) >= maxCached {
		a.answers = map[answerKey]answerEntry{}
	}
}

func resourceName(a Access) string {
	r := a.Resource
	if a.Group != "" {
		r += "." + a.Group
	}
	if a.Namespace != "" {
		r += " in " + a.Namespace
	}
	return r
}

// bearerToken is the token of an "Authorization: Bearer TOKEN" header.
func bearerToken(header string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
