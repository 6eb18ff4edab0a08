package credstore

import (
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/agent/ownerref"
)

// TestSecretOwner: the credential Secret is created owned by the owner
// ServiceAccount, and one made without it gets it when loaded (an agent
// upgraded to have an owner) or written; without an owner it has none.
func TestSecretOwner(t *testing.T) {
	const ns, name = "flotilla-system", "flotilla-agent-cert"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-sa", UID: "sa-uid"}}
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ServiceAccount", Name: "agent-sa", UID: "sa-uid", BlockOwnerDeletion: ptr.To(false)}}
	save := func(t *testing.T, s Store) {
		t.Helper()
		if err := s.SaveKey(t.Context(), []byte("key")); err != nil {
			t.Fatal(err)
		}
	}
	load := func(t *testing.T, s Store) {
		t.Helper()
		if _, err := s.Load(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		existing bool   // a Secret without owners exists
		owner    string // "": none
		do       func(*testing.T, Store)
		want     []metav1.OwnerReference
	}{
		{name: "created owned", owner: "agent-sa", do: save, want: owned},
		{name: "created without an owner", do: save},
		{name: "created while the owner is missing", owner: "missing-sa", do: save},
		{name: "owner added on load", existing: true, owner: "agent-sa", do: load, want: owned},
		{name: "owner added on write", existing: true, owner: "agent-sa", do: save, want: owned},
		{name: "no owner: load leaves it alone", existing: true, do: load},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(sa)
			if tc.existing {
				// The fake sets no resourceVersion of its own.
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Data: map[string][]byte{KeyFile: []byte("key")}}
				if _, err := client.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			log := slog.New(slog.DiscardHandler)
			owner := ownerref.New(client, ns, tc.owner, log, clocktesting.NewFakePassiveClock(time.Now()))
			tc.do(t, NewSecret(client, ns, name, owner, log))
			secret, err := client.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, secret.OwnerReferences); diff != "" {
				t.Errorf("owners of the Secret (-want +got):\n%s", diff)
			}
			if string(secret.Data[KeyFile]) != "key" {
				t.Errorf("Secret's %s = %q, want it kept", KeyFile, secret.Data[KeyFile])
			}
		})
	}
}
