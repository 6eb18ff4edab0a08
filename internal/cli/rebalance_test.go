package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
)

func TestRebalanceWaitsAndPrintsTheResults(t *testing.T) {
	hub := newFakeHub(t)
	hub.rebalance = finishAfter(2, "nginx") // finished at the second look
	r := run(t, hub, "rebalance", "deployment/nginx", "deploy/missing", "-n", "web")
	wantExit(t, r, 1)
	wantOut := `workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000 created
NAMESPACE   WORKLOAD                  RESULT       REASON
web         deployment.apps/missing   Failed       ReferencedBindingNotFound
web         deployment.apps/nginx     Successful   -
`
	if diff := cmp.Diff(wantOut, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	wantErr := "error: 1 of 2 workloads failed: deployment.apps/missing in namespace web: ReferencedBindingNotFound (no such template, or no policy propagates it)\n"
	if r.stderr != wantErr {
		t.Errorf("stderr = %q, want %q", r.stderr, wantErr)
	}
	got := hub.storedRebalancer(t, "rebalance-20260501-120000")
	wantSpec := appsv1alpha1.WorkloadRebalancerSpec{
		Workloads: []appsv1alpha1.ObjectReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx", Namespace: "web"},
			{APIVersion: "apps/v1", Kind: "Deployment", Name: "missing", Namespace: "web"},
		},
		TTLSecondsAfterFinished: ptr(int32(300)),
	}
	if diff := cmp.Diff(wantSpec, got.Spec); diff != "" {
		t.Errorf("spec sent (-want +got):\n%s", diff)
	}
	wantRequests := []string{
		"POST " + rebalancersPath,
		"GET " + rebalancersPath + "/rebalance-20260501-120000",
		"GET " + rebalancersPath + "/rebalance-20260501-120000",
	}
	if diff := cmp.Diff(wantRequests, hub.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestRebalanceKindsNamesAndTTL(t *testing.T) {
	hub := newFakeHub(t)
	hub.rebalance = finishAfter(1, "reader", "db", "w1", "api")
	r := run(t, hub, "rebalance", "clusterrole/reader", "sts/db", "Widget.v1.example.com/w1", "deployment.apps/api",
		"--name", "spread-again", "--ttl", "90m", "-n", "shop")
	wantExit(t, r, 0)
	wantOut := `workloadrebalancer.apps.flotilla.io/spread-again created
NAMESPACE   WORKLOAD                                       RESULT       REASON
shop        deployment.apps/api                            Successful   -
shop        statefulset.apps/db                            Successful   -
shop        widget.example.com/w1                          Successful   -
-           clusterrole.rbac.authorization.k8s.io/reader   Successful   -
`
	if diff := cmp.Diff(wantOut, r.stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	got := hub.storedRebalancer(t, "spread-again")
	want := []appsv1alpha1.ObjectReference{
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reader"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Namespace: "shop"},
		{APIVersion: "example.com/v1", Kind: "Widget", Name: "w1", Namespace: "shop"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", Namespace: "shop"},
	}
	if diff := cmp.Diff(want, got.Spec.Workloads); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if ttl := got.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 5400 {
		t.Errorf("ttlSecondsAfterFinished = %v, want 5400", ttl)
	}
}

func TestRebalanceNoWaitAndKeep(t *testing.T) {
	hub := newFakeHub(t)
	r := run(t, hub, "rebalance", "cm/settings", "--no-wait", "--ttl", "0")
	wantExit(t, r, 0)
	if r.stdout != "workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000 created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	got := hub.storedRebalancer(t, "rebalance-20260501-120000")
	if got.Spec.TTLSecondsAfterFinished != nil || got.Spec.Workloads[0] != (appsv1alpha1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", Namespace: "default"}) {
		t.Errorf("spec = %+v, want configmap default/settings and no TTL", got.Spec)
	}
	if diff := cmp.Diff([]string{"POST " + rebalancersPath}, hub.sent()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// --no-wait allows a TTL too short to read the result in.
	wantExit(t, run(t, hub, "rebalance", "cm/settings", "--no-wait", "--ttl", "1s", "--name", "short"), 0)
	if ttl := hub.storedRebalancer(t, "short").Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 1 {
		t.Errorf("ttl = %v, want 1", ttl)
	}
}

func TestRebalanceNameTaken(t *testing.T) {
	hub := newFakeHub(t)
	hub.addRebalancer(appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "rebalance-20260501-120000"}})
	hub.addRebalancer(appsv1alpha1.WorkloadRebalancer{ObjectMeta: metav1.ObjectMeta{Name: "mine"}})

	// A generated name gets a suffix.
	r := run(t, hub, "rebalance", "deployment/nginx", "--no-wait")
	wantExit(t, r, 0)
	if r.stdout != "workloadrebalancer.apps.flotilla.io/rebalance-20260501-120000-2 created\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	// A chosen one is an error.
	r = run(t, hub, "rebalance", "deployment/nginx", "--name", "mine")
	wantExit(t, r, 1)
	if want := "error: workloadrebalancer \"mine\" already exists: pick another --name, or delete it first\n"; r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
}

func TestRebalanceTimesOut(t *testing.T) {
	hub := newFakeHub(t) // no controller: never finishes
	start := time.Now()
	r := run(t, hub, "rebalance", "deployment/nginx", "--timeout", "600ms")
	wantExit(t, r, 1)
	want := "error: workloadrebalancer \"rebalance-20260501-120000\" did not finish within 600ms (is the hub running its controllers?); " +
		"it stays on the hub: 'flotilla describe workloadrebalancer rebalance-20260501-120000' shows how far it got\n"
	if r.stderr != want {
		t.Errorf("stderr = %q, want %q", r.stderr, want)
	}
	if took := time.Since(start); took < 600*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %s, want about 600ms", took)
	}
	if gets := len(hub.sent()) - 1; gets < 2 {
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hub := newFakeHub(t)
			r := run(t, hub, tt.args...)
			wantExit(t, r, 2)
			if !strings.HasPrefix(r.stderr, "error: "+tt.want) || !strings.HasSuffix(r.stderr, "See 'flotilla rebalance --help' for usage.\n") {
				t.Errorf("stderr = %q, want it to start with %q", r.stderr, "error: "+tt.want)
			}
			if sent := hub.sent(); len(sent) != 0 {
				t.Errorf("sent %q, want no request", sent)
			}
		})
	}
}

func TestRebalanceHelp(t *testing.T) {
	hub := newFakeHub(t)
	r := run(t, hub, "rebalance", "--help")
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
		ObjectMeta: metav1.ObjectMeta{Name: "spread", CreationTimestamp: ago(10 * time.Minute), Generation: 2},
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
	hub := newFakeHub(t)
	hub.addRebalancer(rebalancerFixture())
	hub.addRebalancer(appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{Name: "pending", CreationTimestamp: ago(5 * time.Second), Generation: 1},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{{APIVersion: "v1", Kind: "Namespace", Name: "shop"}}},
	})
	hub.events = append(hub.events,
		rebalancerEvent("spread", "Normal", "RescheduleTriggered", "apps/v1 Deployment web/nginx: Fresh reschedule asked of binding web/nginx-deployment", 9*time.Minute),
		rebalancerEvent("spread", "Normal", "Finished", "2 workloads: 1 successful, 1 failed", 9*time.Minute))

	r := run(t, hub, "get", "workloadrebalancers", "-n", "ignored")
	wantExit(t, r, 0)
	want := `NAME      WORKLOADS   SUCCESSFUL   FAILED   FINISHED   TTL   AGE
pending   1           0            0        -          -     5s
spread    2           1            1        9m ago     60m   10m
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("get (-want +got):\n%s", diff)
	}
	r = run(t, hub, "get", "rebalancer", "spread", "-o", "json")
	wantExit(t, r, 0)
	var got appsv1alpha1.WorkloadRebalancer
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Name != "spread" {
		t.Errorf("-o json: %v\n%s", err, r.stdout)
	}

	r = run(t, hub, "describe", "workloadrebalancer", "spread")
	wantExit(t, r, 0)
	want = `Name:                 spread
Labels:               <none>
Created:              2026-05-01T11:50:00Z (10m ago)
TTL After Finished:   60m (deleted at 2026-05-01T12:51:00Z)
Generation:           2 (observed 2)
Finished:             2026-05-01T11:51:00Z (9m ago)
Workloads:
  NAMESPACE   WORKLOAD                RESULT       REASON
  web         deployment.apps/gone    Failed       ReferencedBindingNotFound
  web         deployment.apps/nginx   Successful   -
Events:
  TYPE     REASON                AGE   COUNT   MESSAGE
  Normal   RescheduleTriggered   9m    1       apps/v1 Deployment web/nginx: Fresh reschedule asked of binding web/nginx-deployment
  Normal   Finished              9m    1       2 workloads: 1 successful, 1 failed
`
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}

	r = run(t, hub, "describe", "rebalancer", "pending")
	wantExit(t, r, 0)
	for _, w := range []string{"TTL After Finished:   - (kept until deleted)", "Finished:             in progress", "Generation:           1 (observed 0)",
		"-           namespace/shop   -        -", "Events:               <none>"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("describe of a pending rebalancer lacks %q:\n%s", w, r.stdout)
		}
	}

	r = run(t, hub, "describe", "workloadrebalancer", "nope")
	wantExit(t, r, 1)
	if !strings.Contains(r.stderr, `workloadrebalancers.apps.flotilla.io "nope" not found`) {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func rebalancerEvent(name, typ, reason, msg string, last time.Duration) corev1.Event {
	e := event(name, typ, reason, msg, last, 1)
	e.InvolvedObject.Kind, e.InvolvedObject.APIVersion = appsv1alpha1.KindWorkloadRebalancer, appsv1alpha1.APIVersion
	e.FirstTimestamp = e.LastTimestamp
	return e
}
