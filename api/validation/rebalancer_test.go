package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
)

// karmadaRebalancer is the proposal's example, as a Karmada user writes it.
const karmadaRebalancer = `
apiVersion: apps.karmada.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: demo
spec:
  workloads:
    - apiVersion: apps/v1
      kind: Deployment
      name: demo-deploy-1
      namespace: default
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: demo-role
    - apiVersion: apps/v1
      kind: Deployment
      name: demo-deploy-2
      namespace: default
  ttlSecondsAfterFinished: 60
`

func TestKarmadaRebalancerIsAccepted(t *testing.T) {
	if !IsRebalancerAPIVersion("apps.karmada.io/v1alpha1") || !IsRebalancerAPIVersion("apps.flotilla.io/v1alpha1") || IsRebalancerAPIVersion("apps/v1") {
		t.Error("IsRebalancerAPIVersion: want both groups and nothing else")
	}
	doc := karmadaRebalancer + "status:\n  finishTime: \"2024-04-17T15:04:05Z\"\n"
	r, errs := WorkloadRebalancer(jsonOf(t, doc))
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs.ToAggregate())
	}
	if r.APIVersion != appsv1alpha1.APIVersion || r.Kind != appsv1alpha1.KindWorkloadRebalancer {
		t.Errorf("type = %s %s, want Flotilla's", r.APIVersion, r.Kind)
	}
	want := appsv1alpha1.ObjectReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "demo-role"}
	if len(r.Spec.Workloads) != 3 || r.Spec.Workloads[1] != want || *r.Spec.TTLSecondsAfterFinished != 60 {
		t.Errorf("spec = %+v", r.Spec)
	}
	if r.Status.FinishTime != nil {
		t.Errorf("status from the document kept: %+v; it is the hub's", r.Status)
	}
}

func TestRebalancerErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           []string
	}{
		{"no workloads", "workloads:\n    - apiVersion: apps/v1\n      kind: Deployment\n      name: demo-deploy-1\n      namespace: default\n    - apiVersion: rbac.authorization.k8s.io/v1\n      kind: ClusterRole\n      name: demo-role\n    - apiVersion: apps/v1\n      kind: Deployment\n      name: demo-deploy-2\n      namespace: default",
			"workloads: []", []string{"spec.workloads: Required value: at least one workload"}},
		{"no apiVersion", "- apiVersion: rbac.authorization.k8s.io/v1\n", "- apiVersion: \"\"\n", []string{"spec.workloads[1].apiVersion: Required value"}},
		{"bad apiVersion", "apiVersion: rbac.authorization.k8s.io/v1", "apiVersion: a/b/c", []string{`spec.workloads[1].apiVersion: Invalid value: "a/b/c"`}},
		{"no kind", "kind: ClusterRole", "kind: \"\"", []string{"spec.workloads[1].kind: Required value"}},
		{"no name", "name: demo-role", "name: \"\"", []string{"spec.workloads[1].name: Required value"}},
		{"bad namespace", "name: demo-deploy-2\n      namespace: default", "name: demo-deploy-2\n      namespace: Not_OK", []string{`spec.workloads[2].namespace: Invalid value: "Not_OK"`}},
		{"duplicate", "name: demo-deploy-2", "name: demo-deploy-1", []string{`spec.workloads[2]: Duplicate value: "same workload as spec.workloads[0]"`}},
		{"negative ttl", "ttlSecondsAfterFinished: 60", "ttlSecondsAfterFinished: -1", []string{"spec.ttlSecondsAfterFinished: Invalid value: -1: must not be negative"}},
		{"unknown field", "ttlSecondsAfterFinished: 60", "ttlSecondsAfterFinished: 60\n  ttl: 3", []string{"spec.ttl: Forbidden: unknown field"}},
		{"namespaced", "name: demo\n", "name: demo\n  namespace: default\n", []string{"metadata.namespace: Forbidden: the kind is cluster-scoped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.Replace(karmadaRebalancer, tt.from, tt.to, 1)
			if doc == karmadaRebalancer {
				t.Fatalf("%q not in the rebalancer", tt.from)
			}
			_, errs := WorkloadRebalancer(jsonOf(t, doc))
			// Each error starts with the wanted text (the rest explains it).
			var got []string
			for i, e := range errs {
				msg := e.Error()
				if i < len(tt.want) && strings.HasPrefix(msg, tt.want[i]) {
					msg = tt.want[i]
				}
				got = append(got, msg)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
