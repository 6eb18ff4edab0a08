package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorthStripping(t *testing.T) {
	update := metav1.ManagedFieldsEntry{Manager: "flotilla-hub", Operation: metav1.ManagedFieldsOperationUpdate}
	apply := metav1.ManagedFieldsEntry{Manager: "gitops", Operation: metav1.ManagedFieldsOperationApply}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"none", nil, false},
		{"updates only", []metav1.ManagedFieldsEntry{update, update}, true},
		{"an apply among them", []metav1.ManagedFieldsEntry{update, apply}, false},
	} {
		if got := WorthStripping(tc.entries); got != tc.want {
			t.Errorf("%s: WorthStripping = %v, want %v", tc.name, got, tc.want)
		}
	}
}
