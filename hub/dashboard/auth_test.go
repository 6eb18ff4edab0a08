package dashboard

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviewer answers TokenReviews (token "good" is alice) and
// SubjectAccessReviews (alice may list clusters and, in team-a only,
// resourcebindings), counting the calls.
func reviewer(t *testing.T) (*fake.Clientset, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	var tokenReviews, accessReviews atomic.Int32
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		accessReviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Verb == "list" &&
			(ra.Resource == "clusters" || ra.Resource == "resourcebindings" && ra.Namespace == "team-a")
		return true, sar, nil
	})
	return kube, &tokenReviews, &accessReviews
}

func TestAuthenticateCaches(t *testing.T) {
	kube, tokenReviews, _ := reviewer(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newAuthCache(kube, 10*time.Second, clk)
	ctx := t.Context()

	for range 3 {
		id, err := a.authenticate(ctx, "good", netip.Prefix{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Identity{User: "alice", Groups: []string{"devs"}}, id); diff != "" {
			t.Errorf("identity (-want +got):\n%s", diff)
		}
	}
	if n := tokenReviews.Load(); n != 1 {
		t.Errorf("%d token reviews for three requests within the TTL, want 1", n)
	}
	for range 2 {
		if _, err := a.authenticate(ctx, "bad", netip.Prefix{}); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("bad token: err = %v, want ErrUnauthenticated", err)
		}
	}
	if n := tokenReviews.Load(); n != 2 {
		t.Errorf("%d token reviews, want 2 (a refusal is cached too)", n)
	}
	if _, err := a.authenticate(ctx, "", netip.Prefix{}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("no token: err = %v, want ErrUnauthenticated", err)
	}
	clk.Step(10 * time.Second)
	if _, err := a.authenticate(ctx, "good", netip.Prefix{}); err != nil {
		t.Fatal(err)
	}
	if n := tokenReviews.Load(); n != 3 {
		t.Errorf("%d token reviews after the TTL, want 3 (asked again)", n)
	}
}

func TestAllowedCachesPerTokenAndQuestion(t *testing.T) {
	kube, _, accessReviews := reviewer(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newAuthCache(kube, 10*time.Second, clk)
	ctx := t.Context()
	alice := Identity{User: "alice"}
	tests := []struct {
		access Access
		want   bool
	}{
		{Access{Verb: "list", Group: "flotilla.io", Resource: "clusters"}, true},
		{Access{Verb: "update", Group: "flotilla.io", Resource: "clusters"}, false},
		{Access{Verb: "list", Group: "flotilla.io", Resource: "resourcebindings", Namespace: "team-a"}, true},
		{Access{Verb: "list", Group: "flotilla.io", Resource: "resourcebindings", Namespace: "team-b"}, false},
		{Access{Verb: "list", Group: "flotilla.io", Resource: "resourcebindings"}, false},
	}
	for round := range 2 {
		for _, tt := range tests {
			got, err := a.allowed(ctx, "good", alice, tt.access)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("round %d: %+v allowed = %v, want %v", round, tt.access, got, tt.want)
			}
		}
	}
	if n := accessReviews.Load(); n != int32(len(tests)) {
		t.Errorf("%d access reviews for two rounds of %d questions, want %d", n, len(tests), len(tests))
	}
	// Another token is another cache entry, even for the same user.
	if _, err := a.allowed(ctx, "other", alice, tests[0].access); err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Second)
	if _, err := a.allowed(ctx, "good", alice, tests[0].access); err != nil {
		t.Fatal(err)
	}
	if n := accessReviews.Load(); n != int32(len(tests))+2 {
		t.Errorf("%d access reviews, want %d (new token, then expiry)", n, len(tests)+2)
	}
}

func TestAuthCacheBounded(t *testing.T) {
	kube, _, _ := reviewer(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newAuthCache(kube, time.Minute, clk)
	for i := range maxCached + 10 {
		if _, err := a.allowed(t.Context(), string(rune('a'+i%26))+time.Duration(i).String(), Identity{User: "x"}, Access{Verb: "get"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.answers); n > maxCached {
		t.Errorf("%d cached answers, want at most %d", n, maxCached)
	}
}

func TestBearerToken(t *testing.T) {
	tests := map[string]string{
		"Bearer abc":   "abc",
		"bearer  abc ": "abc",
		"Basic abc":    "",
		"abc":          "",
		"":             "",
	}
	for header, want := range tests {
		if got := bearerToken(header); got != want {
			t.Errorf("bearerToken(%q) = %q, want %q", header, got, want)
		}
	}
}
