package apiserver

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestOnlyAdminsWriteTaintPolicies: a ClusterTaintPolicy taints clusters
// and so can evict every workload of the fleet; operators and viewers
// read them, only admins write them, in both groups.
func TestOnlyAdminsWriteTaintPolicies(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	if err := InstallRoles(ctx, s.HubConfig); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(s.HubConfig)
	users := map[string]string{"ctp-viewer": ViewerRole, "ctp-operator": OperatorRole, "ctp-admin": AdminRole}
	for user, role := range users {
		bind(t, admin, user, role)
	}
	tests := []struct {
		user, verb string
		allowed    bool
	}{
		{"ctp-viewer", "list", true},
		{"ctp-viewer", "create", false},
		{"ctp-operator", "get", true},
		{"ctp-operator", "create", false},
		{"ctp-operator", "update", false},
		{"ctp-operator", "delete", false},
		{"ctp-admin", "create", true},
		{"ctp-admin", "delete", true},
	}
	for _, tt := range tests {
		for _, group := range []string{"flotilla.io", "policy.karmada.io"} {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: tt.user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: "clustertaintpolicies", Verb: tt.verb}}}
			var allowed bool
			// Retry while the RBAC authorizer's cache catches up with the bindings.
			_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
				if err != nil {
					return false, err
				}
				allowed = got.Status.Allowed
				return allowed == tt.allowed, nil
			})
			if allowed != tt.allowed {
				t.Errorf("%s %s clustertaintpolicies.%s: allowed %v, want %v", tt.user, tt.verb, group, allowed, tt.allowed)
			}
		}
	}
}
