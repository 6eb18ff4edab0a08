package credstore

import (
	"context"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-io/flotilla/agent/work"
	"github.com/flotilla-io/flotilla/test/membercluster"
)

// TestSecretWriteRetriesAConflict: a write to the credential Secret that
// races another one is retried on what the other wrote, keeping both.
// (The agent's own use of a Secret store, from a join to a restart after a
// crash, is the agent package's TestCredentialsInASecret.)
func TestSecretWriteRetriesAConflict(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real API server")
	}
	env, err := membercluster.Start(t.Context(), membercluster.Options{Dir: t.TempDir(), APIServerOnly: true,
		Clusters: membercluster.Specs(1), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("start API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop API server: %v", err)
		}
	})
	client, err := env.Clusters()[0].Clientset()
	if err != nil {
		t.Fatal(err)
	}
	const namespace, name = work.DefaultSystemNamespace, "flotilla-agent-credentials"
	secrets := client.CoreV1().Secrets(namespace)
	store := &secretStore{client: client, namespace: namespace, name: name, log: discard}
	if err := store.SaveKey(t.Context(), []byte("key")); err != nil { // creates the Secret
		t.Fatal(err)
	}

	calls := 0
	err = store.update(t.Context(), func(c *Credentials) error {
		calls++
		if calls == 1 {
			s, err := secrets.Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Annotations = map[string]string{"example.com/touched": "yes"}
			if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		c.NextKey = []byte("next key")
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("update = %v after %d calls of the change, want nil after 2", err, calls)
	}
	s, err := secrets.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations["example.com/touched"] != "yes" || string(s.Data[NextKeyFile]) != "next key" {
		t.Errorf("after the retried write: annotations %v, %s %q; want both writes", s.Annotations, NextKeyFile, s.Data[NextKeyFile])
	}
}
