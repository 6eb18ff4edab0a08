package bootstraptoken

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	tokenutil "k8s.io/cluster-bootstrap/token/util"
)

const (
	// Namespace holds the token Secrets, where kubeadm keeps them.
	Namespace = metav1.NamespaceSystem
	// ClusterLabel on a token Secret binds the token to one cluster name.
	ClusterLabel = "flotilla.io/cluster"
	// UseLabel on a token Secret says how often and for what it joins:
	// UseOnce (also when absent), UseReusable or UseReplace.
	UseLabel = "flotilla.io/token-use"
	// UsedByAnnotation on a single-use token Secret names the certificate
	// request that used it: the token joins nothing else.
	UsedByAnnotation = "flotilla.io/used-by"
	// DefaultTTL is how long a new token lasts unless told otherwise: a
	// token is made for an install about to happen, and an hour covers
	// one on a slow site link (image pulls included).
	DefaultTTL = time.Hour
	// maxDescription bounds a token's description.
	maxDescription = 1024
	// createAttempts: a new token's random ID may collide with an
	// existing one; try again with a new token that many times.
	createAttempts = 3
)

// Values of UseLabel.
const (
	UseOnce     = "once"     // one join, of a new cluster (the default)
	UseReusable = "reusable" // any number of joins, of new clusters only
	UseReplace  = "replace"  // one join, of its cluster even if it already joined
)

// Token is one bootstrap token as its Secret says.
type Token struct {
	ID, Secret  string
	Cluster     string    // the only cluster name it joins; "" = the first to join with it
	Description string    // free text
	Expires     time.Time // zero: never
	Created     time.Time
	// Reusable: it joins any number of new clusters, never binds to one,
	// and is not used up by a join.
	Reusable bool
	// Replace: it may join its Cluster even though that cluster already
	// joined, superseding the agent certificate it has.
	Replace bool
	// UsedBy is the certificate request a single-use token was used for.
	UsedBy string
	// Metadata is what a join with it registers the Cluster with.
	Metadata ClusterMetadata
}

// Use is the token's UseLabel value.
func (t Token) Use() string {
	switch {
	case t.Reusable:
		return UseReusable
	case t.Replace:
		return UseReplace
	}
	return UseOnce
}

// String is the token as an agent presents it: ID.Secret.
func (t Token) String() string { return tokenutil.TokenFromIDAndSecret(t.ID, t.Secret) }

// CreateOptions says what token to make.
type CreateOptions struct {
	TTL         time.Duration // 0: never expires (reusable tokens only)
	Cluster     string
	Description string
	Reusable    bool // joins any number of new clusters
	Replace     bool // may join Cluster although it already joined
	Metadata    ClusterMetadata
}

// Validate refuses options no token could be made of, naming the flag.
func (o CreateOptions) Validate() error {
	switch {
	case o.TTL < 0:
		return fmt.Errorf("--ttl %s: must not be negative", o.TTL)
	case o.Replace && o.Reusable:
		return fmt.Errorf("--replace and --reusable: a reusable token never replaces a cluster that already joined; a replace token joins once")
	case o.Replace && o.Cluster == "":
		return fmt.Errorf("--replace needs --cluster NAME: a token replaces the certificate of exactly the cluster it was made for")
	case o.TTL == 0 && !o.Reusable:
		return fmt.Errorf("--ttl 0 (never expires) needs --reusable: a single-use token is made for one install about to happen and must expire")
	}
	if o.Cluster != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Cluster); len(msgs) > 0 {
			return fmt.Errorf("--cluster %q: not a valid cluster name: %v", o.Cluster, msgs)
		}
	}
	if len(o.Description) > maxDescription {
		return fmt.Errorf("--description: %d bytes, at most %d", len(o.Description), maxDescription)
	}
	return o.Metadata.Validate()
}

// Create makes a new random token and stores its Secret.
func Create(ctx context.Context, client kubernetes.Interface, opts CreateOptions, now time.Time) (Token, error) {
	if err := opts.Validate(); err != nil {
		return Token{}, err
	}
	for range createAttempts {
		raw, err := tokenutil.GenerateBootstrapToken()
		if err != nil {
			return Token{}, fmt.Errorf("generate a bootstrap token: %w", err)
		}
		id, secret, err := splitToken(raw)
		if err != nil {
			return Token{}, err
		}
		t := Token{ID: id, Secret: secret, Cluster: opts.Cluster, Description: opts.Description, Created: now.UTC().Truncate(time.Second),
			Reusable: opts.Reusable, Replace: opts.Replace, Metadata: opts.Metadata}
		if opts.TTL > 0 {
			t.Expires = now.Add(opts.TTL).UTC().Truncate(time.Second)
		}
		stored, err := client.CoreV1().Secrets(Namespace).Create(ctx, t.secret(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return Token{}, fmt.Errorf("store bootstrap token %s: %w", id, err)
		}
		t.Created = stored.CreationTimestamp.Time
		return t, nil
	}
	return Token{}, fmt.Errorf("store a bootstrap token: %d random IDs in a row were taken", createAttempts)
}

// secret is t as a standard bootstrap token Secret.
func (t Token) secret() *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tokenutil.BootstrapTokenSecretName(t.ID), Namespace: Namespace},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			bootstrapapi.BootstrapTokenIDKey:               []byte(t.ID),
			bootstrapapi.BootstrapTokenSecretKey:           []byte(t.Secret),
			bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		},
	}
	if t.Description != "" {
		s.Data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(t.Description)
	}
	if !t.Expires.IsZero() {
		s.Data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(t.Expires.Format(time.RFC3339))
	}
	if m := t.Metadata.encode(); m != nil {
		s.Data[MetadataKey] = m
	}
	s.Labels = map[string]string{UseLabel: t.Use()}
	if t.Cluster != "" {
		s.Labels[ClusterLabel] = t.Cluster
	}
	return s
}

// FromSecret reads a token from its Secret, refusing one that is not a
// well-formed bootstrap token.
func FromSecret(s *corev1.Secret) (Token, error) {
	if s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return Token{}, fmt.Errorf("secret %s/%s: type %q, want %s", s.Namespace, s.Name, s.Type, bootstrapapi.SecretTypeBootstrapToken)
	}
	t := Token{
		ID:          string(s.Data[bootstrapapi.BootstrapTokenIDKey]),
		Secret:      string(s.Data[bootstrapapi.BootstrapTokenSecretKey]),
		Cluster:     s.Labels[ClusterLabel],
		Description: string(s.Data[bootstrapapi.BootstrapTokenDescriptionKey]),
		Created:     s.CreationTimestamp.Time,
		UsedBy:      s.Annotations[UsedByAnnotation],
	}
	if !tokenutil.IsValidBootstrapToken(t.String()) || s.Name != tokenutil.BootstrapTokenSecretName(t.ID) {
		return Token{}, fmt.Errorf("secret %s/%s: not a well-formed bootstrap token (token-id and token-secret must match [a-z0-9]{6} and [a-z0-9]{16}, the name bootstrap-token-<token-id>)", s.Namespace, s.Name)
	}
	switch use := s.Labels[UseLabel]; use {
	case "", UseOnce:
	case UseReusable:
		t.Reusable = true
	case UseReplace:
		t.Replace = true
	default:
		return Token{}, fmt.Errorf("secret %s/%s: label %s=%q: want %s, %s or %s", s.Namespace, s.Name, UseLabel, use, UseOnce, UseReusable, UseReplace)
	}
	if exp := s.Data[bootstrapapi.BootstrapTokenExpirationKey]; len(exp) > 0 {
		at, err := time.Parse(time.RFC3339, string(exp))
		if err != nil {
			return Token{}, fmt.Errorf("secret %s/%s: expiration %q: want an RFC 3339 time", s.Namespace, s.Name, exp)
		}
		t.Expires = at
	}
	m, err := decodeMetadata(s.Data[MetadataKey])
	if err != nil {
		return Token{}, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	t.Metadata = m
	return t, nil
}

// Expired reports whether the token has expired at now.
func (t Token) Expired(now time.Time) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) }

// List returns the well-formed tokens, oldest first, and one error per
// token Secret that is not.
func List(ctx context.Context, client kubernetes.Interface) ([]Token, []error, error) {
	list, err := client.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("type", string(bootstrapapi.SecretTypeBootstrapToken)).String(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list bootstrap tokens: %w", err)
	}
	var tokens []Token
	var bad []error
	for i := range list.Items {
		t, err := FromSecret(&list.Items[i])
		if err != nil {
			bad = append(bad, err)
			continue
		}
		tokens = append(tokens, t)
	}
	slices.SortFunc(tokens, func(a, b Token) int { return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID)) })
	return tokens, bad, nil
}

// Delete removes a token, given as its ID or as the whole token.
func Delete(ctx context.Context, client kubernetes.Interface, idOrToken string) (string, error) {
	id := idOrToken
	if tokenID, _, err := splitToken(idOrToken); err == nil {
		id = tokenID
	} else if !tokenutil.IsValidBootstrapTokenID(idOrToken) {
		return "", fmt.Errorf("%q is neither a token ID ([a-z0-9]{6}) nor a token ([a-z0-9]{6}.[a-z0-9]{16})", idOrToken)
	}
	err := client.CoreV1().Secrets(Namespace).Delete(ctx, tokenutil.BootstrapTokenSecretName(id), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return id, fmt.Errorf("bootstrap token %s not found", id)
	}
	if err != nil {
		return id, fmt.Errorf("delete bootstrap token %s: %w", id, err)
	}
	return id, nil
}

// IDOf is the ID of token (ID.Secret), or "" if it is malformed.
func IDOf(token string) string {
	id, _, err := splitToken(token)
	if err != nil {
		return ""
	}
	return id
}

// splitToken parses ID.Secret in kubeadm's format.
func splitToken(token string) (id, secret string, err error) {
	if !tokenutil.IsValidBootstrapToken(token) {
		return "", "", fmt.Errorf("malformed bootstrap token: want [a-z0-9]{6}.[a-z0-9]{16}")
	}
	return token[:bootstrapapi.BootstrapTokenIDBytes], token[bootstrapapi.BootstrapTokenIDBytes+1:], nil
}
