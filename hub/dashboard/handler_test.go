package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
	"github.com/google/go-cmp/cmp"
)

// memLeases is a LeaseSource held by the test, standing in for the hub's
// registry (which needs a hub around it).
type memLeases struct {
	mu     sync.Mutex
	leases map[string]Lease
	fns    []func(string)
}

func (m *memLeases) Lease(name string) (Lease, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[name]
	return l, ok
}

func (m *memLeases) OnLeaseChange(fn func(string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fns = append(m.fns, fn)
}

func (m *memLeases) renew(name string, at time.Time) {
	m.mu.Lock()
	l := m.leases[name]
	l.Cluster, l.LastRenewal, l.Duration = name, at, 2*time.Second
	l.Renewals = append(l.Renewals, at)
	m.leases[name] = l
	fns := m.fns
	m.mu.Unlock()
	for _, fn := range fns {
		fn(name)
	}
}

// fixture is a dashboard over a real API server, served by httptest, with
// an operator's and a namespace viewer's tokens.
type fixture struct {
	env              *hubapi.Env
	url              string
	leases           *memLeases
	ns, otherNS      string
	operator, viewer string
	streamsEnded     chan struct{}
	clusterName      string
	tokenReviews     atomic.Int64 // made by the dashboard
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	env.Cleanup(t)
	f := &fixture{env: env, leases: &memLeases{leases: map[string]Lease{}}, ns: env.Namespace(t), otherNS: env.Namespace(t),
		streamsEnded: make(chan struct{}, 16)}
	f.clusterName = "dash-" + f.ns
	f.createCluster(t, f.clusterName)
	f.createBinding(t, f.ns, "web")
	f.createBinding(t, f.otherNS, "db")
	f.operator, f.viewer = f.tokens(t)

	clients, err := kube.NewClients(countTokenReviews(env.RESTConfig(), &f.tokenReviews))
	if err != nil {
		t.Fatal(err)
	}
	informers, err := controller.NewInformers(clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Clusters: informers.Clusters, Bindings: informers.Bindings, ClusterBindings: informers.ClusterBindings,
		Leases: f.leases, Kube: clients.Kube, API: env.RESTConfig(), FlushInterval: 50 * time.Millisecond,
		Settings: Settings{HubID: "test-hub", GracePeriod: 4000, DefaultLeaseDuration: 2000}, Logger: slog.New(slog.DiscardHandler)})
	runCtx, stop := context.WithCancel(context.Background())
	informers.Start(runCtx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	if !controller.StartAndSync(runCtx, informers.Clusters, informers.Bindings, informers.ClusterBindings) {
		t.Fatal("informers did not sync")
	}
	h := d.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			f.streamsEnded <- struct{}{}
		}
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fixture) createCluster(t *testing.T, name string) {
	t.Helper()
	_, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{Zone: "z1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) createBinding(t *testing.T, ns, name string) {
	t.Helper()
	_, err := f.env.Flotilla.FlotillaV1alpha1().ResourceBindings(ns).Create(t.Context(), &v1alpha1.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ResourceBindingSpec{Resource: v1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name},
			Clusters: []v1alpha1.TargetCluster{{Name: f.clusterName}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// countTokenReviews returns cfg counting the TokenReviews made through it.
func countTokenReviews(cfg *rest.Config, n *atomic.Int64) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/tokenreviews") {
				n.Add(1)
			}
			return next.RoundTrip(req)
		})
	})
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// tokens makes ServiceAccounts in the test's namespace: an operator (may
// list and update clusters, list every binding) and a viewer (may list
// clusters, and bindings in the test's namespace only).
func (f *fixture) tokens(t *testing.T) (operator, viewer string) {
	t.Helper()
	ctx, kube := t.Context(), f.env.Kube
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	role := func(name string, rules ...rbacv1.PolicyRule) {
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		must(err)
		t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	clusterBinding := func(name, roleName, sa string) {
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: f.ns}}}, metav1.CreateOptions{})
		must(err)
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	read := []string{"get", "list", "watch"}
	role(f.ns+"-operator", rbacv1.PolicyRule{APIGroups: []string{"flotilla.io"}, Resources: []string{"clusters"}, Verbs: append(read, "update")},
		rbacv1.PolicyRule{APIGroups: []string{"flotilla.io"}, Resources: []string{"resourcebindings", "clusterresourcebindings"}, Verbs: read})
	role(f.ns+"-fleet", rbacv1.PolicyRule{APIGroups: []string{"flotilla.io"}, Resources: []string{"clusters"}, Verbs: read})
	role(f.ns+"-bindings", rbacv1.PolicyRule{APIGroups: []string{"flotilla.io"}, Resources: []string{"resourcebindings"}, Verbs: read})
	for _, sa := range []string{"operator", "viewer"} {
		_, err := kube.CoreV1().ServiceAccounts(f.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
	}
	clusterBinding(f.ns+"-operator", f.ns+"-operator", "operator")
	clusterBinding(f.ns+"-viewer", f.ns+"-fleet", "viewer")
	_, err := kube.RbacV1().RoleBindings(f.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: f.ns + "-bindings"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: f.ns}}}, metav1.CreateOptions{})
	must(err)
	token := func(sa string) string {
		tr, err := kube.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		must(err)
		return tr.Status.Token
	}
	return token("operator"), token("viewer")
}

func (f *fixture) request(t *testing.T, ctx context.Context, method, path, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseReader reads events of a stream in a goroutine of its own.
type sseEvent struct{ name, data string }

func readStream(body io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 16<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.data != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

// next returns the next event whose decoded message satisfies cond.
func next[T any](t *testing.T, events <-chan sseEvent, name string, cond func(T) bool) T {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream ended while waiting for a %s event", name)
			}
			if ev.name != name {
				continue
			}
			var v T
			if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
				t.Fatalf("%s event: %v\n%s", name, err, ev.data)
			}
			if cond(v) {
				return v
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %s event as wanted within 10 s", name)
			return zero
		}
	}
}

func clusterIn(views []ClusterView, name string) (ClusterView, bool) {
	for _, v := range views {
		if v.Name == name {
			return v, true
		}
	}
	return ClusterView{}, false
}

func bindingKeys(views []BindingView) []string {
	var keys []string
	for _, b := range views {
		keys = append(keys, b.Key)
	}
	return keys
}

func TestStream(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	resp := f.request(t, ctx, "GET", "/dashboard/api/stream", f.viewer, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	events := readStream(resp.Body)
	snap := next(t, events, "snapshot", func(s Snapshot) bool { _, ok := clusterIn(s.Clusters, f.clusterName); return ok })
	if got, want := strings.Join(bindingKeys(snap.Bindings), ","), f.ns+"/web"; !strings.Contains(","+got+",", ","+want+",") || strings.Contains(got, f.otherNS+"/") {
		t.Errorf("viewer's snapshot bindings %q: want %s and nothing of %s", got, want, f.otherNS)
	}
	if !snap.BindingsLimited {
		t.Error("viewer's snapshot does not say its bindings are limited")
	}

	// A renewal in the registry's memory reaches the stream, coalesced.
	renewed := time.UnixMilli(time.Now().UnixMilli())
	for i := range 5 {
		f.leases.renew(f.clusterName, renewed.Add(time.Duration(i)*time.Millisecond))
	}
	d := next(t, events, "delta", func(d Delta) bool {
		v, ok := clusterIn(d.Clusters, f.clusterName)
		return ok && v.LastRenewal == renewed.Add(4*time.Millisecond).UnixMilli()
	})
	if v, _ := clusterIn(d.Clusters, f.clusterName); v.LeaseDuration != 2000 {
		t.Errorf("renewed view: lease duration %d ms, want 2000", v.LeaseDuration)
	}
	hist := f.request(t, t.Context(), "GET", "/dashboard/api/clusters/"+f.clusterName+"/lease", f.viewer, "")
	var h LeaseHistory
	if err := json.NewDecoder(hist.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	hist.Body.Close()
	if len(h.Renewals) != 5 || h.Renewals[4] != renewed.Add(4*time.Millisecond).UnixMilli() {
		t.Errorf("lease history %v, want the 5 renewals", h.Renewals)
	}
	// A change through the API reaches it too; a binding in a namespace the
	// viewer may not list does not.
	f.createBinding(t, f.otherNS, "hidden")
	f.createBinding(t, f.ns, "shown")
	next(t, events, "delta", func(d Delta) bool {
		for _, k := range bindingKeys(d.Bindings) {
			if strings.HasPrefix(k, f.otherNS+"/") {
				t.Errorf("viewer got binding %s", k)
			}
		}
		return strings.Contains(strings.Join(bindingKeys(d.Bindings), ","), f.ns+"/shown")
	})

	// The stream ends with its request.
	cancel()
	select {
	case <-f.streamsEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream handler did not return after its request was canceled")
	}
	resp.Body.Close()
}

func TestAuthAndActions(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	tests := []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"no token", "GET", "/dashboard/api/whoami", "", "", http.StatusUnauthorized},
		{"bad token", "GET", "/dashboard/api/stream", "not-a-token", "", http.StatusUnauthorized},
		{"viewer may not cordon", "POST", "/dashboard/api/clusters/" + f.clusterName + "/cordon", f.viewer, `{"cordon":true}`, http.StatusForbidden},
		{"form post refused", "POST", "/dashboard/api/clusters/" + f.clusterName + "/cordon", f.operator, "", http.StatusBadRequest},
		{"hub's taints are not the user's", "POST", "/dashboard/api/clusters/" + f.clusterName + "/taints", f.operator,
			`{"add":{"key":"cluster.flotilla.io/unreachable","effect":"NoSchedule"}}`, http.StatusBadRequest},
		{"operator cordons", "POST", "/dashboard/api/clusters/" + f.clusterName + "/cordon", f.operator, `{"cordon":true}`, http.StatusOK},
		{"operator taints", "POST", "/dashboard/api/clusters/" + f.clusterName + "/taints", f.operator,
			`{"add":{"key":"maintenance","value":"yes","effect":"NoSchedule"}}`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.request(t, ctx, tt.method, tt.path, tt.token, tt.body)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %s %s, want %d", tt.method, tt.path, resp.Status, body, tt.want)
			}
		})
	}
	c, err := f.env.Flotilla.FlotillaV1alpha1().Clusters().Get(ctx, f.clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Spec.Unschedulable || len(c.Spec.Taints) != 1 || c.Spec.Taints[0].Key != "maintenance" || c.Spec.Taints[0].TimeAdded == nil {
		t.Errorf("cluster after the operator's actions: unschedulable %v, taints %+v", c.Spec.Unschedulable, c.Spec.Taints)
	}
	if got := c.ManagedFields[len(c.ManagedFields)-1].Manager; got != fieldManager {
		t.Errorf("last writer %q, want %q", got, fieldManager)
	}

	for _, tc := range []struct {
		token string
		want  Capabilities
	}{{f.operator, Capabilities{Cordon: true}}, {f.viewer, Capabilities{}}} {
		resp := f.request(t, ctx, "GET", "/dashboard/api/whoami", tc.token, "")
		var who struct {
			User string       `json:"user"`
			Can  Capabilities `json:"can"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if who.Can != tc.want || !strings.HasPrefix(who.User, "system:serviceaccount:"+f.ns+":") {
			t.Errorf("whoami = %+v, want %+v for a ServiceAccount of %s", who, tc.want, f.ns)
		}
	}
}

func TestPageServed(t *testing.T) {
	d := New(Config{Clusters: nilSource[*v1alpha1.Cluster]{}, Bindings: nilSource[*v1alpha1.ResourceBinding]{},
		ClusterBindings: nilSource[*v1alpha1.ClusterResourceBinding]{}, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	for path, want := range map[string]string{"/": "<title>Flotilla hub</title>", "/dashboard/static/app.js": "readEvents", "/dashboard/static/app.css": "--fresh"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %s, body without %q", path, resp.Status, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
}

// nilSource is an empty Source, for tests that serve only files.
type nilSource[PT any] struct{}

func (nilSource[PT]) Run(context.Context)               {}
func (nilSource[PT]) Synced() <-chan struct{}           { return nil }
func (nilSource[PT]) Get(string) PT                     { var zero PT; return zero }
func (nilSource[PT]) List() []PT                        { return nil }
func (nilSource[PT]) AddHandler(controller.Handler[PT]) {}

// Guessing tokens against the real dashboard costs the hub's API a few
// TokenReviews, not one per guess: past the budget of the source address
// the answer is 429 with Retry-After, made before any review. A user
// signed in before keeps working.
func TestGuessedTokensCostBoundedTokenReviews(t *testing.T) {
	f := newFixture(t)
	whoami := func(token string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.url+"/dashboard/api/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := whoami(f.operator); resp.StatusCode != http.StatusOK {
		t.Fatalf("the operator's sign-in: %s", resp.Status)
	}
	before := f.tokenReviews.Load()
	const guesses = 40
	codes := map[int]int{}
	retryAfter := ""
	for i := range guesses {
		resp := whoami(fmt.Sprintf("guess-%d", i))
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	reviews := f.tokenReviews.Load() - before
	t.Logf("%d guessed tokens from one address: answers %v, %d TokenReviews", guesses, codes, reviews)
	if diff := cmp.Diff(map[int]int{http.StatusUnauthorized: signInBurst, http.StatusTooManyRequests: guesses - signInBurst}, codes); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if reviews != signInBurst {
		t.Errorf("%d TokenReviews for %d guesses, want %d", reviews, guesses, signInBurst)
	}
	if secs, err := strconv.Atoi(retryAfter); err != nil || secs < 1 || secs > int(signInEvery/time.Second)+1 {
		t.Errorf("Retry-After %q, want whole seconds up to the refill", retryAfter)
	}
	if resp := whoami(f.operator); resp.StatusCode != http.StatusOK {
		t.Errorf("the operator, signed in before the guesses: %s", resp.Status)
	}
}
