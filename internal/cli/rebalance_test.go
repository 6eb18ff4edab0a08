package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
)

const rebalancersPath = "/apis/apps.flotilla.io/v1alpha1/workloadrebalancers"

func TestRebalanceWaitsAndPrintsTheResults(t *testing.T) {
	h := newHub(t)
	h.finishAfter(t, 1, "nginx") // finished at the second look
	r := h.run(t, "rebalance", "deployment/nginx", "deploy/missing", "-n", "web")
	wantExit(t, r, 1)
	wantOut := `workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000 created
NAMESPACE   WORKLOAD                  RESULT       REASON
web         deployment.apps/missing   Failed       ReferencedBindingNotFound
web         deployment.apps/nginx     Successful   -
`
	if diff := gocmp.Diff(wantOut, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	wantErr := "error: 1 of 2 workloads failed: deployment.apps/missing in namespace web: ReferencedBindingNotFound (no such template, or no policy propagates it)\n"
	if r.stderr != wantErr {
		t.Errorf("stderr = %q, want %q", r.stderr, wantErr)
	}
	got := h.storedRebalancer(t, "rebalance-20260501-120000")
	wantSpec := appsv1alpha1.WorkloadRebalancerSpec{
		Workloads: []appsv1alpha1.ObjectReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", Namespace: "web"},
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "missing", Namespace: "web"},
		},
		TTLSecondsAfterFinished: ptr(int32(300)),
	}
	if diff := gocmp.Diff(wantSpec, got.Spec); diff != "" {
		t.Errorf("spec sent (-want +got):\n%s", diff)
	}
	wantRequests := []string{
		"POST " + rebalancersPath + "?fieldManager=flotilla",
		"GET " + rebalancersPath + "/rebalance-20260501-120000",
		"GET " + rebalancersPath + "/rebalance-20260501-120000",
	}
	if diff := gocmp.Diff(wantRequests, h.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestRebalanceKindsNamesAndTTL(t *testing.T) {
	h := newHub(t)
	h.finishAfter(t, 0, "reader", "db", "w1", "api")
	r := h.run(t, "rebalance", "clusterrole/reader", "sts/db", "Widget.v1.example.com/w1", "deployment.apps/api",
		"--name", "spread-again", "--ttl", "90m", "-n", "shop")
	wantExit(t, r, 0)
	wantOut := `workloadrebalancer.apps.flotilla.io/spread-again created
NAMESPACE   WORKLOAD                                       RESULT       REASON
shop        deployment.apps/api                            Successful   -
shop        statefulset.apps/db                            Successful   -
shop        widget.example.com/w1                          Successful   -
-           clusterrole.rbac.authorization.k8s.io/reader   Successful   -
`
	if diff := gocmp.Diff(wantOut, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	got := h.storedRebalancer(t, "spread-again")
	want := []appsv1alpha1.ObjectReference{
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Namespace: "shop"},
		{APIVersion: "example.com/v1", Kind: "Widget", Name: "w1", Namespace: "shop"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", Namespace: "shop"},
	}
	if diff := gocmp.Diff(want, got.Spec.Workloads); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if ttl := got.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 5400 {
		t.Errorf("ttlSecondsAfterFinished = %v, want 5400", ttl)
	}
}

func TestRebalanceNoWaitAndKeep(t *testing.T) {
	h := newHub(t)
	r := h.run(t, "rebalance", "cm/settings", "--no-wait", "--ttl", "0")
	wantExit(t, r, 0)
	if r.stdout != "workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000 created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	got := h.storedRebalancer(t, "rebalance-20260501-120000")
	if got.Spec.TTLSecondsAfterFinished != nil || got.Spec.Workloads[0] != (appsv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Namespace: "default"}) {
		t.Errorf("spec = %+v, want configmap default/settings and no TTL", got.Spec)
	}
	if diff := gocmp.Diff([]string{"POST " + rebalancersPath + "?fieldManager=flotilla"}, h.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// --no-wait allows a TTL too short to read the result in.
	wantExit(t, h.run(t, "rebalance", "cm/settings", "--no-wait", "--ttl", "1s", "--name", "short"), 0)
	if ttl := h.storedRebalancer(t, "short").Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 1 {
		t.Errorf("ttl = %v, want 1", ttl)
	}
}

func TestRebalanceNameTaken(t *testing.T) {
	h := newHub(t)
	h.addRebalancer(t, appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "rebalance-20260501-120000"}})
	h.addRebalancer(t, appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "mine"}})

	// A generated name gets a suffix.
	r := h.run(t, "rebalance", "deployment/nginx", "--no-wait")
	wantExit(t, r, 0)
	if r.stdout != "workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000-2 created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	// A chosen one is an error.
	r = h.run(t, "rebalance", "deployment/nginx", "--name", "mine")
	wantExit(t, r, 1)
	if want := "error: workloadrebalancer \"mine\" already exists: pick another --name, or delete it first\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestRebalanceTimesOut(t *testing.T) {
	h := newHub(t) // no controller: never finishes
	start := time.Now()
	r := h.run(t, "rebalance", "deployment/nginx", "--timeout", "600ms")
	wantExit(t, r, 1)
	want := "error: workloadrebalancer \"rebalance-20260501-120000\" did not finish within 600ms (is the hub running its controllers?); " +
		"it stays on the hub: 'flotilla describe workloadrebalancer rebalance-20260501-120000' shows how far it got\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	if took := time.Since(start); took < 600*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %s, want about 600ms", took)
	}
	if gets := len(h.sent()) - 1; gets < 2 {
		t.Errorf("looked %d times, want a look every %s", gets, rebalancePoll)
	}
}

func TestRebalanceUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"nothing", []string{"rebalance"}, "name at least one workload as KIND/NAME, such as deployment/nginx"},
		{"no kind", []string{"rebalance", "nginx"}, `invalid workload "nginx": expected KIND/NAME, such as deployment/nginx`},
		{"two slashes", []string{"rebalance", "deployment/web/nginx"}, `invalid workload "deployment/web/nginx": expected KIND/NAME`},
		{"bad name", []string{"rebalance", "deployment/Nginx"}, `invalid workload "deployment/Nginx": name "Nginx": a lowercase RFC 1123 subdomain`},
		{"unknown kind", []string{"rebalance", "gadget/g1"}, `unknown kind "gadget"; known: deployment, statefulset, daemonset, replicaset, job, cronjob, pod, service, configmap, secret, serviceaccount, persistentvolumeclaim, ingress, role, rolebinding, horizontalpodautoscaler, poddisruptionbudget, namespace, clusterrole, clusterrolebinding, customresourcedefinition, persistentvolume, storageclass, priorityclass; other kinds as Kind.version.group, such as Widget.v1.example.com`},
		{"lower-case full kind", []string{"rebalance", "widget.v1.example.com/w1"}, `invalid kind "widget.v1.example.com": write Kind.version.group with the Kind as the template spells it`},
		{"twice", []string{"rebalance", "deploy/a", "deployment/a"}, "deployment/a is named twice"},
		{"short ttl while waiting", []string{"rebalance", "deploy/a", "--ttl", "5s"}, "--ttl 5s could delete the WorkloadRebalancer before its result is read: give at least 10s, 0 to keep it, or --no-wait"},
		{"negative ttl", []string{"rebalance", "deploy/a", "--ttl", "-1m"}, "invalid --ttl -1m0s: must not be negative (0 keeps the WorkloadRebalancer)"},
		{"negative timeout", []string{"rebalance", "deploy/a", "--timeout", "-1s"}, "invalid --timeout -1s: must not be negative"},
		{"bad rebalancer name", []string{"rebalance", "deploy/a", "--name", "A_B"}, `invalid --name "A_B": a lowercase RFC 1123 subdomain`},
		{"bad namespace", []string{"rebalance", "deploy/a", "-n", "a_b"}, `invalid namespace "a_b"`},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, tt.args...)
			wantExit(t, r, 2)
			if !strings.HasPrefix(r.stderr, "error: "+tt.want) || !strings.HasSuffix(r.stderr, "See 'flotilla rebalance --help' for usage.\n") {
				t.Errorf("stderr = %q, want it to start with %q", r.stderr, "error: "+tt.want)
			}
			if sent := h.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}

func TestRebalanceHelp(t *testing.T) {
	r := runEnv(t, nil, "rebalance", "--help")
	wantExit(t, r, 0)
	for _, want := range []string{
		"flotilla rebalance KIND/NAME [KIND/NAME...] [-n NAMESPACE] [--name NAME] [--ttl DURATION] [--no-wait] [--timeout DURATION]",
		"Fresh schedule", "ReferencedBindingNotFound", "flotilla rebalance deployment/nginx -n web",
		"--ttl DURATION", "(default 5m0s)", "--timeout DURATION", "how long to wait for the result", "(default 2m0s)", "--no-wait",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.stdout)
		}
	}
	// The global --timeout (of each request) is shadowed by the command's.
	if strings.Contains(r.stdout, "time limit of each request") {
		t.Errorf("help lists the global --timeout too:\n%s", r.stdout)
	}
}

func rebalancerFixture() appsv1alpha1.WorkloadRebalancer {
	return appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "spread", Generation: 2},
		Spec: appsv1alpha1.WorkloadRebalancerSpec{
			Workloads: []appsv1alpha1.ObjectReference{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", Namespace: "web"},
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "gone", Namespace: "web"},
			},
			TTLSecondsAfterFinished: ptr(int32(3600)),
		},
		Status: appsv1alpha1.WorkloadRebalancerStatus{
			ObservedGeneration: 2, FinishTime: agoPtr(9 * time.Minute),
			ObservedWorkloads: []appsv1alpha1.ObservedWorkload{
				{Workload: appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "gone", Namespace: "web"},
					Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound},
				{Workload: appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", Namespace: "web"},
					Result: appsv1alpha1.RebalanceSuccessful},
			},
		},
	}
}

func TestGetAndDescribeRebalancers(t *testing.T) {
	h := newHub(t)
	spread := h.addRebalancer(t, rebalancerFixture())
	h.addRebalancer(t, appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", Generation: 1},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{{APIVersion: "v1", Kind: "Namespace", Name: "shop"}}},
	})
	h.addEvent(t, rebalancerEvent("spread", "Normal", "RescheduleTriggered", "apps/v1 Deployment web/nginx: Fresh reschedule asked of binding web/nginx-deployment", 10*time.Minute))
	h.addEvent(t, rebalancerEvent("spread", "Normal", "Finished", "2 workloads: 1 successful, 1 failed", 9*time.Minute))

	r := h.run(t, "get", "workloadrebalancers", "-n", "ignored")
	wantExit(t, r, 0)
	want := `NAME      WORKLOADS   SUCCESSFUL   FAILED   FINISHED   TTL   AGE
pending   1           0            0        -          -     0s
spread    2           1            1        9m ago     60m   0s
`
	if diff := gocmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	r = h.run(t, "get", "rebalancer", "spread", "-o", "json")
	wantExit(t, r, 0)
	var got appsv1alpha1.WorkloadRebalancer
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Name != "spread" {
		t.Errorf("-o json: %v\n%s", err, r.stdout)
	}

	r = h.run(t, "describe", "workloadrebalancer", "spread")
	wantExit(t, r, 0)
	want = `Name:                 spread
Labels:               <none>
Created:              ` + created(spread.CreationTimestamp) + `
TTL After Finished:   60m (deleted at 2026-05-01T12:51:00Z)
Generation:           2 (observed 2)
Finished:             2026-05-01T11:51:00Z (9m ago)
Workloads:
  NAMESPACE   WORKLOAD                RESULT       REASON
  web         deployment.apps/gone    Failed       ReferencedBindingNotFound
  web         deployment.apps/nginx   Successful   -
Events:
  TYPE     REASON                AGE   COUNT   MESSAGE
  Normal   RescheduleTriggered   10m   1       apps/v1 Deployment web/nginx: Fresh reschedule asked of binding web/nginx-deployment
  Normal   Finished              9m    1       2 workloads: 1 successful, 1 failed
`
	if diff := gocmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}

	r = h.run(t, "describe", "rebalancer", "pending")
	wantExit(t, r, 0)
	for _, w := range []string{"TTL After Finished:   - (kept until deleted)", "Finished:             in progress", "Generation:           1 (observed 0)",
		"-           namespace/shop   -        -", "Events:               <none>"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("describe of a pending rebalancer lacks %q:\n%s", w, r.stdout)
		}
	}

	r = h.run(t, "describe", "workloadrebalancer", "nope")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, `workloadrebalancers.apps.flotilla.io "nope" not found`) {
		t.Errorf("stderr = %q", r.stderr)
	}
}

// addRebalancer creates a WorkloadRebalancer at generation rb.Generation
// (each change of its spec is one) with rb's status, as the hub's
// controller writes it; it returns the stored object.
func (h *testHub) addRebalancer(t *testing.T, rb appsv1alpha1.WorkloadRebalancer) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	ctx := context.Background()
	rebalancers := h.Flotilla.AppsV1alpha1().WorkloadRebalancers()
	gen, status := rb.Generation, rb.Status
	rb.Generation, rb.Status = 0, appsv1alpha1.WorkloadRebalancerStatus{}
	if len(rb.Spec.Workloads) == 0 {
		rb.Spec.Workloads = []appsv1alpha1.ObjectReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x", Namespace: "default"}}
	}
	// Until the last edit, the TTL is one no fixture uses.
	ttl := rb.Spec.TTLSecondsAfterFinished
	if gen > 1 {
		rb.Spec.TTLSecondsAfterFinished = ptr(int32(1_000_000))
	}
	stored, err := rebalancers.Create(ctx, &rb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create workloadrebalancer %s: %v", rb.Name, err)
	}
	for stored.Generation < gen { // each edit of the spec is a generation
		stored.Spec.TTLSecondsAfterFinished = ptr(int32(1_000_000) + int32(stored.Generation))
		if stored.Generation+1 == gen {
			stored.Spec.TTLSecondsAfterFinished = ttl
		}
		if stored, err = rebalancers.Update(ctx, stored, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stored.Status = status
	if stored, err = rebalancers.UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of workloadrebalancer %s: %v", rb.Name, err)
	}
	return stored
}

func (h *testHub) storedRebalancer(t *testing.T, name string) *appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	rb, err := h.Flotilla.AppsV1alpha1().WorkloadRebalancers().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("workloadrebalancer %s: %v", name, err)
	}
	return rb
}

// finishAfter plays the hub's rebalancer controller: once flotilla has
// looked at a rebalancer n times (0: once it created it), every workload
// named in bound succeeds and the others fail with
// ReferencedBindingNotFound, so flotilla sees the result at its next look.
func (h *testHub) finishAfter(t *testing.T, n int, bound ...string) {
	t.Helper()
	var (
		mu    sync.Mutex
		looks = map[string]int{}
	)
	h.setAnswered(func(req *http.Request, resp *http.Response) {
		name, ok := strings.CutPrefix(req.URL.Path, rebalancersPath+"/")
		switch {
		case req.Method == http.MethodPost && req.URL.Path == rebalancersPath && n == 0 && resp.StatusCode == http.StatusCreated:
			var created appsv1alpha1.WorkloadRebalancer
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if err := json.Unmarshal(body, &created); err != nil {
				t.Errorf("controller: %v", err)
				return
			}
			name = created.Name
		case req.Method == http.MethodGet && ok:
			mu.Lock()
			looks[name]++
			look := looks[name]
			mu.Unlock()
			if look != n {
				return
			}
		default:
			return
		}
		rebalancers := h.Flotilla.AppsV1alpha1().WorkloadRebalancers()
		rb, err := rebalancers.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("controller: %v", err)
			return
		}
		rb.Status = appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: rb.Generation, FinishTime: ptr(metav1.NewTime(testNow))}
		for _, wl := range rb.Spec.Workloads {
			o := appsv1alpha1.ObservedWorkload{Workload: wl, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound}
			if slices.Contains(bound, wl.Name) {
				o.Result, o.Reason = appsv1alpha1.RebalanceSuccessful, ""
			}
			rb.Status.ObservedWorkloads = append(rb.Status.ObservedWorkloads, o)
		}
		slices.SortFunc(rb.Status.ObservedWorkloads, func(a, b appsv1alpha1.ObservedWorkload) int {
			return cmp.Or(strings.Compare(a.Workload.APIVersion, b.Workload.APIVersion), strings.Compare(a.Workload.Kind, b.Workload.Kind),
				strings.Compare(a.Workload.Namespace, b.Workload.Namespace), strings.Compare(a.Workload.Name, b.Workload.Name))
		})
		if _, err := rebalancers.UpdateStatus(context.Background(), rb, metav1.UpdateOptions{}); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
}

func rebalancerEvent(name, typ, reason, msg string, last time.Duration) corev1.Event {
	e := event(name, typ, reason, msg, last, 1)
	e.InvolvedObject.Kind, e.InvolvedObject.APIVersion = appsv1alpha1.KindWorkloadRebalancer, appsv1alpha1.APIVersion
	e.FirstTimestamp = e.LastTimestamp
	return e
}
