package credstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-io/flotilla/agent/ownerref"
	"github.com/flotilla-io/flotilla/agent/work"
)

// secretStore keeps the credentials in one Secret of the member cluster,
// one data key per item (ca.crt, tls.crt, tls.key, tls.key.next), so that
// they survive the agent's pod and a newly elected replica finds what the
// previous leader joined or renewed. Every write reads the Secret, changes
// it and updates it with the resourceVersion it read (optimistic
// concurrency); on a conflict it reads again and reapplies the change,
// whose preconditions are checked against what it read. The first write
// creates the Secret (type Opaque); data keys other than the items are
// left alone. With an owner, the Secret is created owned by it, and a
// Secret without it gets it when loaded or written.
type secretStore struct {
	client          kubernetes.Interface
	namespace, name string
	owner           *ownerref.Owner
	log             *slog.Logger
}

// NewSecret is the store in Secret namespace/name of the member cluster,
// read and written with client, and owned by owner (nil: none); log hears
// of a renewal it finishes.
func NewSecret(client kubernetes.Interface, namespace, name string, owner *ownerref.Owner, log *slog.Logger) Store {
	return &secretStore{client: client, namespace: namespace, name: name, owner: owner, log: log}
}

func (s *secretStore) Location(item string) string {
	return fmt.Sprintf("Secret %s/%s, key %s", s.namespace, s.name, item)
}

func (s *secretStore) Absent(item string) error {
	return fmt.Errorf("Secret %s/%s has no %s", s.namespace, s.name, item)
}

// get reads the Secret and its items; a missing Secret is nil and no items.
func (s *secretStore) get(ctx context.Context) (*corev1.Secret, Credentials, error) {
	secret, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, Credentials{}, nil
	}
	if err != nil {
		return nil, Credentials{}, fmt.Errorf("read the credentials from Secret %s/%s: %w", s.namespace, s.name, err)
	}
	var c Credentials
	for _, it := range c.items() {
		if data, ok := secret.Data[it.name]; ok {
			*it.data = data
		}
	}
	return secret, c, nil
}

func (s *secretStore) Load(ctx context.Context) (Credentials, error) {
	secret, c, err := s.get(ctx)
	if err != nil {
		return Credentials{}, err
	}
	if secret != nil {
		s.owner.Adopt(ctx, fmt.Sprintf("Secret %s/%s", s.namespace, s.name), secret.OwnerReferences, func(ctx context.Context, patch []byte) error {
			_, err := s.client.CoreV1().Secrets(s.namespace).Patch(ctx, s.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: work.FieldManager})
			return err
		})
	}
	if _, changed := settleRotation(c); !changed {
		return c, nil
	}
	var settled Credentials
	err = s.update(ctx, func(c *Credentials) error {
		*c, _ = settleRotation(*c)
		settled = *c
		return nil
	})
	if err != nil {
		return Credentials{}, fmt.Errorf("finish the interrupted certificate renewal: %w", err)
	}
	s.log.Warn("finished a certificate renewal that was interrupted", "secret", s.namespace+"/"+s.name)
	return settled, nil
}

func (s *secretStore) SaveKey(ctx context.Context, keyPEM []byte) error {
	return s.update(ctx, func(c *Credentials) error {
		if c.Key != nil && string(c.Key) != string(keyPEM) {
			return fmt.Errorf("%s appeared while the agent made its own: another agent is joining; restart to join with it", s.Location(KeyFile))
		}
		c.Key = keyPEM
		return nil
	})
}

func (s *secretStore) SaveJoined(ctx context.Context, caPEM, certPEM []byte) error {
	return s.update(ctx, func(c *Credentials) error {
		if _, err := tls.X509KeyPair(certPEM, c.Key); err != nil {
			return fmt.Errorf("the joined certificate is not for the key in %s (did another agent change it?): %w", s.Location(KeyFile), err)
		}
		c.CA, c.Cert = caPEM, certPEM
		return nil
	})
}

func (s *secretStore) SaveNextKey(ctx context.Context, keyPEM []byte) error {
	return s.update(ctx, func(c *Credentials) error {
		c.NextKey = keyPEM
		return nil
	})
}

// installRenewed replaces tls.crt and tls.key and drops tls.key.next in
// one update: a crash leaves the old pair or the new one.
func (s *secretStore) InstallRenewed(ctx context.Context, certPEM []byte) error {
	return s.update(ctx, func(c *Credentials) error {
		if _, err := tls.X509KeyPair(certPEM, c.NextKey); err != nil {
			return fmt.Errorf("the renewed certificate is not for the key in %s (did another agent renew meanwhile?): %w", s.Location(NextKeyFile), err)
		}
		c.Key, c.Cert, c.NextKey, c.NextCert = c.NextKey, certPEM, nil, nil
		return nil
	})
}

// secretResource names Secrets in the conflict a lost race to create the
// Secret becomes, so that update retries with what the winner wrote.
var secretResource = schema.GroupResource{Resource: "secrets"}

// update applies change to the Secret's items as read, and writes them
// back with the resourceVersion read (creating the Secret if there is
// none), rereading and reapplying change on a conflict.
func (s *secretStore) update(ctx context.Context, change func(*Credentials) error) error {
	secrets := s.client.CoreV1().Secrets(s.namespace)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		secret, c, err := s.get(ctx)
		if err != nil {
			return err
		}
		if err := change(&c); err != nil {
			return err
		}
		if secret == nil {
			// A join may come before the Work engine made the namespace.
			if err := work.EnsureNamespace(ctx, s.client, s.namespace); err != nil {
				return err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace,
					Labels: map[string]string{work.LabelManagedBy: work.ManagedBy}},
				Type: corev1.SecretTypeOpaque,
			}
		}
		secret.OwnerReferences = ownerref.With(secret.OwnerReferences, s.owner.Ref(ctx))
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		for _, it := range c.items() {
			if *it.data == nil {
				delete(secret.Data, it.name)
			} else {
				secret.Data[it.name] = *it.data
			}
		}
		if secret.ResourceVersion == "" {
			_, err = secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: work.FieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(secretResource, s.name, errors.New("created meanwhile"))
			}
		} else {
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: work.FieldManager})
		}
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("write the credentials to Secret %s/%s: %w", s.namespace, s.name, err)
		}
		return err
	})
}
