package work

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

// TestRecordOwner: a record is written owned by the owner ServiceAccount;
// records made without it, readable or not, get it when the records are
// loaded (an agent upgraded to have an owner); without an owner, none.
func TestRecordOwner(t *testing.T) {
	const ns = DefaultSystemNamespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-sa", UID: "sa-uid"}}
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ServiceAccount", Name: "agent-sa", UID: "sa-uid", BlockOwnerDeletion: ptr.To(false)}}
	oldRecord := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{LabelWorkRecord: "true", LabelManagedBy: ManagedBy}}, Data: data}
	}
	tests := []struct {
		name  string
		owner string // "": none
		want  []metav1.OwnerReference
	}{
		{name: "owned", owner: "agent-sa", want: owned},
		{name: "no owner", want: nil},
		{name: "owner missing", owner: "missing-sa", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(sa, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
				oldRecord("old", map[string]string{keyGeneration: "1", keyBinding: "default/old"}),
				oldRecord("unreadable", map[string]string{keyGeneration: "not a number"}))
			owner := ownerref.New(client, ns, tc.owner, slog.New(slog.DiscardHandler), clocktesting.NewFakePassiveClock(time.Now()))
			s := recordStore{client: client, namespace: ns, owner: owner}

			records, bad, err := s.load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(records) != 1 || len(bad) != 1 {
				t.Fatalf("loaded %v, bad %v; want the old record and the unreadable one", records, bad)
			}
			if err := s.save(t.Context(), "new", &record{Generation: 1, Binding: "default/new"}); err != nil {
				t.Fatal(err)
			}
			if err := s.save(t.Context(), "old", &record{Generation: 2, Binding: "default/old"}); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"old", "unreadable", "new"} {
				cm, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, cm.OwnerReferences); diff != "" {
					t.Errorf("owners of record %s (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}
