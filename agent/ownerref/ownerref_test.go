package ownerref

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const namespace, saName = "flotilla-system", "flotilla-agent"

func serviceAccount(uid types.UID) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: saName, UID: uid}}
}

// wantRef is the reference to serviceAccount(uid).
func wantRef(uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: saName, UID: uid, BlockOwnerDeletion: ptr.To(false)}
}

// gets counts the ServiceAccount reads client has seen.
func gets(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "serviceaccounts" {
			n++
		}
	}
	return n
}

func TestNoOwner(t *testing.T) {
	client := fake.NewClientset()
	o := New(client, namespace, "", slog.New(slog.DiscardHandler), clocktesting.NewFakePassiveClock(time.Now()))
	if o != nil {
		t.Fatalf("New with no name = %+v, want nil", o)
	}
	if ref := o.Ref(t.Context()); ref != nil {
		t.Errorf("Ref of no owner = %+v, want nil", ref)
	}
	o.Adopt(t.Context(), "a ConfigMap", nil, func(context.Context, []byte) error {
		t.Error("no owner patched an object")
		return nil
	})
	if len(client.Actions()) > 0 {
		t.Errorf("no owner sent requests: %v", client.Actions())
	}
}

// TestRefReadOnceAndKept: the owner is read once, and its UID kept even
// once it is gone, so that late writes still name it.
func TestRefReadOnceAndKept(t *testing.T) {
	client := fake.NewClientset(serviceAccount("uid-1"))
	o := New(client, namespace, saName, slog.New(slog.DiscardHandler), clocktesting.NewFakePassiveClock(time.Now()))
	for range 3 {
		if diff := cmp.Diff(wantRef("uid-1"), o.Ref(t.Context())); diff != "" {
			t.Errorf("Ref (-want +got):\n%s", diff)
		}
	}
	if err := client.CoreV1().ServiceAccounts(namespace).Delete(t.Context(), saName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantRef("uid-1"), o.Ref(t.Context())); diff != "" {
		t.Errorf("Ref after the owner was deleted (-want +got):\n%s", diff)
	}
	if n := gets(client); n != 1 {
		t.Errorf("%d reads of the owner, want 1", n)
	}
}

// TestMissingOwner: an owner that cannot be read gives no reference and
// one warning; it is read again only RetryInterval later, and used once
// it appears.
func TestMissingOwner(t *testing.T) {
	client := fake.NewClientset()
	var logs bytes.Buffer
	clk := clocktesting.NewFakePassiveClock(time.Now())
	o := New(client, namespace, saName, slog.New(slog.NewTextHandler(&logs, nil)), clk)

	for range 3 {
		if ref := o.Ref(t.Context()); ref != nil {
			t.Fatalf("Ref of a missing owner = %+v, want nil", ref)
		}
	}
	if n := gets(client); n != 1 {
		t.Errorf("%d reads within the retry interval, want 1", n)
	}
	clk.SetTime(clk.Now().Add(RetryInterval))
	if ref := o.Ref(t.Context()); ref != nil {
		t.Fatalf("Ref of a missing owner = %+v, want nil", ref)
	}
	if n := gets(client); n != 2 {
		t.Errorf("%d reads after the retry interval, want 2", n)
	}
	if n := strings.Count(logs.String(), "cannot read the owner"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}

	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(t.Context(), serviceAccount("uid-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(RetryInterval))
	if diff := cmp.Diff(wantRef("uid-2"), o.Ref(t.Context())); diff != "" {
		t.Errorf("Ref once the owner exists (-want +got):\n%s", diff)
	}
}

// TestAdopt: an object without the owner gets it beside its other owners;
// one with it is not written.
func TestAdopt(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "uid-other"}
	tests := []struct {
		name      string
		have      []metav1.OwnerReference
		wantPatch bool
	}{
		{name: "no owners", wantPatch: true},
		{name: "another owner", have: []metav1.OwnerReference{other}, wantPatch: true},
		{name: "owned already", have: []metav1.OwnerReference{other, *wantRef("uid-1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "record", OwnerReferences: tc.have}}
			client := fake.NewClientset(serviceAccount("uid-1"), cm)
			o := New(client, namespace, saName, slog.New(slog.DiscardHandler), clocktesting.NewFakePassiveClock(time.Now()))
			patched := false
			o.Adopt(t.Context(), "ConfigMap record", cm.OwnerReferences, func(ctx context.Context, patch []byte) error {
				patched = true
				_, err := client.CoreV1().ConfigMaps(namespace).Patch(ctx, cm.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
				return err
			})
			if patched != tc.wantPatch {
				t.Errorf("patched %v, want %v", patched, tc.wantPatch)
			}
			got, err := client.CoreV1().ConfigMaps(namespace).Get(t.Context(), cm.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := With(tc.have, wantRef("uid-1"))
			byUID := cmpopts.SortSlices(func(a, b metav1.OwnerReference) bool { return a.UID < b.UID })
			if diff := cmp.Diff(want, got.OwnerReferences, byUID); diff != "" {
				t.Errorf("owners after Adopt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWith(t *testing.T) {
	a := metav1.OwnerReference{Kind: "ServiceAccount", Name: "a", UID: "uid-a"}
	b := metav1.OwnerReference{Kind: "ServiceAccount", Name: "b", UID: "uid-b"}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		ref  *metav1.OwnerReference
		want []metav1.OwnerReference
	}{
		{name: "no owner", refs: []metav1.OwnerReference{a}, want: []metav1.OwnerReference{a}},
		{name: "added", ref: &a, want: []metav1.OwnerReference{a}},
		{name: "added to others", refs: []metav1.OwnerReference{b}, ref: &a, want: []metav1.OwnerReference{b, a}},
		{name: "held", refs: []metav1.OwnerReference{a, b}, ref: &a, want: []metav1.OwnerReference{a, b}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, With(tc.refs, tc.ref)); diff != "" {
				t.Errorf("With (-want +got):\n%s", diff)
			}
			if !Has(With(tc.refs, tc.ref), tc.ref) {
				t.Error("Has(With(refs, ref), ref) = false")
			}
		})
	}
}
