package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flotilla-io/flotilla/internal/atomicfile"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// chromiumPath is Debian's Chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// teamBindingsYAML gives two namespaces a binding each: a viewer of
// team-a must see the first only.
const teamBindingsYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {team: a}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: settings-everywhere, namespace: team-a}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: settings}]
  placement: {clusterAffinity: {clusterNames: [member-1, member-2, member-3]}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: secret-plans, namespace: team-b}
data: {team: b}
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicy
metadata: {name: plans-everywhere, namespace: team-b}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, name: secret-plans}]
  placement: {clusterAffinity: {clusterNames: [member-1, member-2, member-3]}}
`

// TestDashboard drives the hub's web page in headless Chromium against a
// hub and three real member clusters: the fleet shows them fresh; a killed
// agent's lease bar turns late, then expired, and its row shows Unknown
// with unreachable:NoSchedule within the grace period and a second, without
// a reload; the agent back, it is fresh again. An operator cordons from the
// cluster page; a viewer of one namespace sees no actions and no binding of
// another namespace. Its screenshots of the fleet (Ready, then with member-1
// Unknown) and of a cluster's page replace those in docs/images/ on every
// run.
func TestDashboard(t *testing.T) {
	requireChromium(t)
	f := startFleet(t, 3)
	h := f.hub
	f.apply("teams.yaml", teamBindingsYAML)
	waitFor(t, 30*time.Second, "both bindings", func() (bool, string) {
		return f.binding("team-a", "settings-configmap") != nil && f.binding("team-b", "secret-plans-configmap") != nil, "not yet"
	})
	operator, viewer := dashboardTokens(t, h)
	shots := newScreenshots(t)
	browser := newBrowser(t)
	url := "http://" + h.httpAddr + "/"

	page := browser.tab(t)
	signIn(t, page, url, operator)
	waitPage(t, page, 30*time.Second, "three fresh, Ready clusters", func(s pageState) bool {
		return len(s.Rows) == 3 && s.allRows(func(r rowState) bool { return r.Lease == "fresh" && r.Ready == "True" })
	})
	shots.take(t, page, "fleet-fresh")

	// Past the hub's start-up grace, so that the lease grace alone decides.
	restartGraceEnds := h.readyAt.Add(testGrace + testLeaseDuration)
	waitFor(t, time.Until(restartGraceEnds)+5*time.Second, "the hub's start-up grace to end", func() (bool, string) {
		return time.Now().After(restartGraceEnds), "start-up grace"
	})
	if err := f.agents["member-1"].Kill(); err != nil {
		t.Fatal(err)
	}
	var sawLate bool
	var unknown pageState
	waitPage(t, page, testGrace+10*time.Second, "member-1 Unknown with unreachable:NoSchedule", func(s pageState) bool {
		r := s.row("member-1")
		if r.Lease == "late" && !sawLate {
			sawLate = true
			shots.take(t, page, "fleet-late")
		}
		unknown = s
		return r.Ready == "Unknown" && strings.Contains(r.Taints, "unreachable:NoSchedule")
	})
	r := unknown.row("member-1")
	shots.take(t, page, "fleet-expired")
	t.Logf("member-1 shown Unknown with %q %v after its last renewal (grace %v); lease bar %s", r.Taints, time.Duration(r.AgeMs)*time.Millisecond, testGrace, r.Lease)
	if !sawLate {
		t.Error("the lease bar never showed late between fresh and expired")
	}
	if r.Lease != "expired" {
		t.Errorf("lease bar %q when Unknown, want expired", r.Lease)
	}
	if limit := testGrace + time.Second; time.Duration(r.AgeMs)*time.Millisecond > limit {
		t.Errorf("Unknown shown %v after the last renewal, want within grace + 1 s = %v", time.Duration(r.AgeMs)*time.Millisecond, limit)
	}
	for _, name := range []string{"member-2", "member-3"} {
		if r := unknown.row(name); r.Lease != "fresh" || r.Ready != "True" {
			t.Errorf("%s while member-1 is down: %+v, want fresh and Ready", name, r)
		}
	}
	if unknown.Reloads != 0 {
		t.Errorf("the page reloaded %d times", unknown.Reloads)
	}

	if err := f.agents["member-1"].Start(); err != nil {
		t.Fatal(err)
	}
	waitPage(t, page, 30*time.Second, "member-1 fresh and Ready again", func(s pageState) bool {
		r := s.row("member-1")
		return r.Lease == "fresh" && r.Ready == "True" && !strings.Contains(r.Taints, "unreachable")
	})
	shots.take(t, page, "fleet-recovered")

	t.Run("an operator cordons from the cluster page", func(t *testing.T) {
		// A ClusterTaintPolicy's taint shows the policy that added it.
		flotilla, err := versioned.NewForConfig(h.restConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		shown := &v1alpha1.ClusterTaintPolicy{ObjectMeta: metav1.ObjectMeta{Name: "edge-maintenance"}, Spec: v1alpha1.ClusterTaintPolicySpec{
			TargetClusters:  &v1alpha1.ClusterAffinity{ClusterNames: []string{"member-2"}},
			AddOnConditions: []v1alpha1.MatchCondition{{ConditionType: v1alpha1.ClusterConditionReady, Operator: v1alpha1.MatchConditionOpIn, StatusValues: []metav1.ConditionStatus{metav1.ConditionTrue}}},
			Taints:          []v1alpha1.PolicyTaint{{Key: "example.com/maintenance", Value: "planned", Effect: corev1.TaintEffectPreferNoSchedule}},
		}}
		if _, err := flotilla.FlotillaV1alpha1().ClusterTaintPolicies().Create(t.Context(), shown, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		goTo(t, page, "#/cluster/member-2")
		waitFor(t, 10*time.Second, "member-2's page naming the policy of its taint", func() (bool, string) {
			text := eval[string](t, page, `[...document.querySelectorAll("#cluster .taints")].map(e => e.textContent).join(" ")`)
			return strings.Contains(text, "example.com/maintenance=planned:PreferNoSchedule") && strings.Contains(text, "by edge-maintenance"), text
		})
		run(t, page, chromedp.WaitVisible(chromedp.CSS("#cordon")),
			chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
				_, err := chromedp.Evaluate[any](`document.getElementById("cordon").click()`)(ctx, tt)
				return err
			}))
		waitFor(t, 10*time.Second, "member-2 cordoned", func() (bool, string) {
			c := h.cluster(t, "member-2")
			return c.Spec.Unschedulable, describe(c)
		})
		run(t, page, chromedp.WaitVisible(chromedp.CSS("#uncordon")))
		waitFor(t, 10*time.Second, "member-2's lease history on its page", func() (bool, string) {
			n := eval[int](t, page, `document.querySelectorAll("#cluster .history .tick").length`)
			return n > 0, fmt.Sprintf("%d intervals shown", n)
		})
		shots.take(t, page, "cluster-operator")
	})

	t.Run("a viewer of team-a sees no actions and no binding of team-b", func(t *testing.T) {
		view := browser.tab(t)
		signIn(t, view, url, viewer)
		goTo(t, view, "#/cluster/member-2")
		run(t, view, chromedp.WaitVisible(chromedp.CSS(`.grid[data-cluster="member-2"]`)))
		buttons := eval[int](t, view, `document.querySelectorAll("button.action").length`)
		if buttons != 0 {
			t.Errorf("viewer sees %d action buttons on the cluster page", buttons)
		}
		shots.take(t, view, "cluster-viewer")
		goTo(t, view, "#/workloads")
		run(t, view, chromedp.WaitVisible(chromedp.CSS(`#workloads tr[data-binding="team-a/settings-configmap"]`)))
		keys := eval[[]string](t, view, `[...document.querySelectorAll("#workloads tr[data-binding]")].map(e => e.dataset.binding)`)
		buttons = eval[int](t, view, `document.querySelectorAll("#workloads button.action").length`)
		if len(keys) != 1 || keys[0] != "team-a/settings-configmap" {
			t.Errorf("viewer sees bindings %q, want only team-a/settings-configmap", keys)
		}
		if buttons != 0 {
			t.Errorf("viewer sees %d action buttons on the workloads page", buttons)
		}
		shots.take(t, view, "workloads-viewer")
		// The operator, for contrast, sees both and may rebalance.
		goTo(t, page, "#/workloads")
		run(t, page, chromedp.WaitVisible(chromedp.CSS(`#workloads tr[data-binding="team-b/secret-plans-configmap"]`)))
		shots.take(t, page, "workloads-operator")
	})
}

func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s missing: .ci/run installs Debian's chromium package", chromiumPath)
	}
	t.Skipf("%s missing: install Debian's chromium package (apt-get install -y chromium) to run the dashboard's browser test", chromiumPath)
}

// dashboardTokens makes two ServiceAccounts and their tokens: an operator
// (ClusterRole flotilla-operator) and a viewer who may read the fleet but
// only team-a's bindings.
func dashboardTokens(t *testing.T, h *hub) (operator, viewer string) {
	t.Helper()
	client, err := kubernetes.NewForConfig(h.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "dashboard-users"
	create := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	create("namespace", err)
	sa := func(name string) rbacv1.Subject {
		_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		create("serviceaccount "+name, err)
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}
	}
	op, view := sa("operator"), sa("viewer")
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-operator"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flotilla-operator"}, Subjects: []rbacv1.Subject{op}}, metav1.CreateOptions{})
	create("operator binding", err)
	_, err = client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"flotilla.io"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	create("fleet-reader", err)
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fleet-reader"}, Subjects: []rbacv1.Subject{view}}, metav1.CreateOptions{})
	create("viewer binding", err)
	_, err = client.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "flotilla-viewer"}, Subjects: []rbacv1.Subject{view}}, metav1.CreateOptions{})
	create("viewer team-a binding", err)
	token := func(name string) string {
		tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s: %v", name, err)
		}
		return tr.Status.Token
	}
	return token("operator"), token("viewer")
}

// browser is a headless Chromium with a fresh profile.
type browser struct{ ctx context.Context }

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1500, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return &browser{ctx: ctx}
}

// tab opens a new tab: its own sessionStorage, so its own sign-in.
func (b *browser) tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("new tab: %v", err)
	}
	return ctx
}

func run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// goTo moves the page to another view by its URL fragment, as its links
// do: no page load.
func goTo(t *testing.T, tab context.Context, fragment string) {
	t.Helper()
	eval[string](t, tab, fmt.Sprintf("location.hash = %q", fragment))
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

func signIn(t *testing.T, tab context.Context, url, token string) {
	t.Helper()
	run(t, tab, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin-button")),
		chromedp.WaitVisible(chromedp.CSS("#fleet")))
}

// rowState is one fleet row as the page shows it.
type rowState struct {
	Ready, Lease, Taints string
	AgeMs                int64 // lease age by the page's clock (hub time)
}

type pageState struct {
	Rows    map[string]rowState
	Reloads int
}

func (s pageState) row(name string) rowState { return s.Rows[name] }

func (s pageState) allRows(ok func(rowState) bool) bool {
	for _, r := range s.Rows {
		if !ok(r) {
			return false
		}
	}
	return true
}

// readPageJS reads the fleet rows from the DOM, and each lease's age from
// the page's own clock.
const readPageJS = `(() => {
  const rows = {};
  for (const el of document.querySelectorAll("#fleet-body .row")) {
    const name = el.dataset.cluster, c = state.clusters.get(name);
    rows[name] = {Ready: el.querySelector(".ready").textContent, Lease: el.querySelector(".lease").dataset.state,
      Taints: el.querySelector(".taints").textContent, AgeMs: c && c.lastRenewal ? Math.round(hubNow() - c.lastRenewal) : -1};
  }
  return {Rows: rows, Reloads: performance.getEntriesByType("navigation").filter(n => n.type === "reload").length};
})()`

// waitPage reads the page every 50 ms until cond holds.
func waitPage(t *testing.T, tab context.Context, timeout time.Duration, what string, cond func(pageState) bool) {
	t.Helper()
	var last pageState
	waitFor(t, timeout, what+" on the page", func() (bool, string) {
		ctx, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[pageState](readPageJS))
		if err != nil {
			return false, err.Error()
		}
		last = s
		return cond(s), fmt.Sprintf("%+v", last.Rows)
	})
}

// screenshots go to the test's artifact folder, and the last of each name
// also to the repository's .cache (ignored by git) to look at. Those named
// in docsImages also replace their file in docs/images/ on every run, so the
// pictures in docs/operations.md show today's page.
type screenshots struct{ dir string }

// docsImages maps a screenshot's name to its file in docs/images/.
var docsImages = map[string]string{
	"fleet-fresh":      "dashboard-fleet.png",         // three clusters Ready, leases fresh
	"fleet-expired":    "dashboard-fleet-unknown.png", // member-1 Unknown, lease expired, tainted
	"cluster-operator": "dashboard-cluster.png",       // member-2's page: cordoned, lease history
}

// docsImagesDir is docs/images/, from this package's folder.
const docsImagesDir = "../../docs/images"

func newScreenshots(t *testing.T) *screenshots { return &screenshots{dir: t.ArtifactDir()} }

func (s *screenshots) take(t *testing.T, tab context.Context, name string) {
	t.Helper()
	viewport := eval[[2]int](t, tab, "[innerWidth, innerHeight]")
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := checkScreenshot(shot, viewport); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(s.dir, "dashboard-"+name+".png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if cache, err := filepath.Abs("../../.cache"); err == nil {
		if os.MkdirAll(cache, 0o755) == nil {
			_ = os.WriteFile(filepath.Join(cache, "dashboard-"+name+".png"), shot, 0o644)
		}
	}
	t.Logf("screenshot %s", path)
	if file, ok := docsImages[name]; ok {
		docsPath := filepath.Join(docsImagesDir, file)
		if err := replaceFile(docsPath, shot); err != nil {
			t.Fatalf("screenshot %s for the docs: %v", name, err)
		}
		t.Logf("screenshot %s also in docs/images/%s (%d bytes)", name, file, len(shot))
	}
}

// checkScreenshot makes sure a screenshot is a whole PNG that covers the
// page's viewport (CSS pixels, one device pixel each) and is not a blank
// page.
func checkScreenshot(data []byte, viewport [2]int) error {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not a PNG: %w", err)
	}
	if b := img.Bounds(); b.Dx() < viewport[0] || b.Dy() < viewport[1] || b.Dx() < 800 || b.Dy() < 500 {
		return fmt.Errorf("%dx%d pixels, want at least the viewport's %dx%d and 800x500", b.Dx(), b.Dy(), viewport[0], viewport[1])
	}
	if len(data) < 20<<10 {
		return fmt.Errorf("%d bytes, want at least 20 KiB: a blank page?", len(data))
	}
	return nil
}

// replaceFile writes data to path whole or not at all, so that a failed
// write leaves the old file whole.
func replaceFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
