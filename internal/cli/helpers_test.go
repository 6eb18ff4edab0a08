package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

// The tests run flotilla against a real API server with Flotilla's CRDs
// (test/hubapi), one per test binary. Only the API server runs: the
// tests create what the hub's controllers would (cluster status, bindings,
// Works, events) with the admin clients, and play a controller where a
// command waits for one.
func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// testNow is the fixed clock of every test. The API server stamps
// creationTimestamp with the real clock, later than testNow, so ages
// counted from creation print as 0s (age clamps a time ahead of now);
// every other time the tests set relative to testNow.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// ago is a metav1.Time d before testNow.
func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func agoPtr(d time.Duration) *metav1.Time { t := ago(d); return &t }

func microAgo(d time.Duration) *metav1.MicroTime {
	t := metav1.NewMicroTime(testNow.Add(-d))
	return &t
}

func ptr[T any](v T) *T { return &v }

// Namespaces the fixtures use by name, so outputs do not depend on
// generated names. They are created on first use and kept (the server is
// the test binary's); what tests put in them is deleted at test end.
var fixedNamespaces = []string{
	"default", "shop", "web", v1alpha1.LeaseNamespace,
	v1alpha1.ExecutionNamespace("member1"), v1alpha1.ExecutionNamespace("member2"), v1alpha1.ExecutionNamespace("member3"),
}

// wipedResources are the kinds tests create in fixedNamespaces.
var wipedResources = []schema.GroupVersionResource{
	v1alpha1.SchemeGroupVersion.WithResource(policiesResource),
	v1alpha1.SchemeGroupVersion.WithResource(bindingsResource),
	v1alpha1.SchemeGroupVersion.WithResource(worksResource),
	{Version: "v1", Resource: "events"},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
}

// testHub is the API server as one test sees it, with a record of the
// requests flotilla sent.
type testHub struct {
	*hubapi.Env
	t *testing.T

	mu       sync.Mutex
	requests []string // "GET /path?query", in order
	bodies   []string // the bodies, "" for none
	// answered, when set, runs after the server answered a request of
	// flotilla and before flotilla reads the answer: a concurrent writer
	// gets in between, or the answer is changed.
	answered func(req *http.Request, resp *http.Response)
}

// newHub returns the test binary's API server; at test end the fixtures
// in fixedNamespaces and every cluster-scoped Flotilla object are deleted.
// Tests that use it must not run in parallel.
func newHub(t *testing.T) *testHub {
	t.Helper()
	if !testNow.Before(time.Now()) {
		t.Fatalf("testNow %s is not in the past: creation ages would not print as 0s", testNow)
	}
	env := hubapi.Start(t)
	env.Cleanup(t)
	h := &testHub{Env: env, t: t}
	for _, ns := range fixedNamespaces {
		h.ensureNamespace(t, ns)
	}
	t.Cleanup(h.wipe)
	return h
}

// ensureNamespace creates namespace ns unless it exists.
func (h *testHub) ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	_, err := h.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// wipe deletes every object of wipedResources in fixedNamespaces,
// finalizers cleared first.
func (h *testHub) wipe() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range fixedNamespaces {
		for _, gvr := range wipedResources {
			ri := h.Dynamic.Resource(gvr).Namespace(ns)
			list, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				h.t.Errorf("wipe: list %s in %s: %v", gvr.Resource, ns, err)
				continue
			}
			for _, item := range list.Items {
				if len(item.GetFinalizers()) > 0 {
					_, err := ri.Patch(ctx, item.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
					if err != nil && !apierrors.IsNotFound(err) {
						h.t.Errorf("wipe: clear finalizers of %s %s/%s: %v", gvr.Resource, ns, item.GetName(), err)
					}
				}
				if err := ri.Delete(ctx, item.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					h.t.Errorf("wipe: delete %s %s/%s: %v", gvr.Resource, ns, item.GetName(), err)
				}
			}
		}
	}
}

// sent is every request flotilla sent so far.
func (h *testHub) sent() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.requests)
}

// sentMatching is the requests of method whose path starts with prefix,
// with their bodies.
func (h *testHub) sentMatching(method, prefix string) (requests, bodies []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.requests {
		if strings.HasPrefix(r, method+" "+prefix) {
			requests = append(requests, r)
			bodies = append(bodies, h.bodies[i])
		}
	}
	return requests, bodies
}

// writes is the requests that could change something (not GET).
func (h *testHub) writes() []string {
	var out []string
	for _, r := range h.sent() {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

func (h *testHub) setAnswered(f func(req *http.Request, resp *http.Response)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered = f
}

// wrap records flotilla's requests: it is App.WrapTransport.
func (h *testHub) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		// client-go adds ?timeout= (--timeout) to every request: left
		// out, so that tests read what flotilla asked for.
		u := *req.URL
		q := u.Query()
		q.Del("timeout")
		u.RawQuery = q.Encode()
		h.mu.Lock()
		h.requests = append(h.requests, req.Method+" "+u.RequestURI())
		h.bodies = append(h.bodies, string(body))
		answered := h.answered
		h.mu.Unlock()
		resp, err := next.RoundTrip(req)
		if err == nil && answered != nil {
			answered(req, resp)
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// result is what one run of flotilla produced.
type result struct {
	code           int
	stdout, stderr string
}

// run runs flotilla against the hub (through $KUBECONFIG) at testNow.
func (h *testHub) run(t *testing.T, args ...string) result {
	t.Helper()
	return h.runStdin(t, "", args...)
}

// runStdin runs flotilla against the hub with stdin as its standard input.
func (h *testHub) runStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runApp(t, map[string]string{"KUBECONFIG": h.Kubeconfig}, stdin, h.wrap, args...)
}

// runEnv runs flotilla with exactly the environment env, nothing recorded.
func runEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	return runApp(t, env, "", nil, args...)
}

func runApp(t *testing.T, env map[string]string, stdin string, wrap func(http.RoundTripper) http.RoundTripper, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	app := &App{
		Stdin:         strings.NewReader(stdin),
		Stdout:        &stdout,
		Stderr:        &stderr,
		Now:           func() time.Time { return testNow },
		Getenv:        func(k string) string { return env[k] },
		WrapTransport: wrap,
	}
	code := app.Run(t.Context(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantExit fails the test unless r exited with code.
func wantExit(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// squeeze collapses runs of blanks, so a test of aligned output does not
// depend on column widths.
func squeeze(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// created is how describe prints a creation time the API server stamped:
// in UTC, and 0s ago at testNow (see testNow).
func created(t metav1.Time) string {
	return t.UTC().Format(time.RFC3339) + " (0s ago)"
}
