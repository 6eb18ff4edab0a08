package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// This file serves the WorkloadRebalancer paths of docs/api.md.

func (h *fakeHub) routeRebalancers(mux *http.ServeMux) {
	mux.HandleFunc("POST "+rebalancersPath, h.createRebalancer)
	mux.HandleFunc("GET "+rebalancersPath, h.listRebalancers)
	mux.HandleFunc("GET "+rebalancersPath+"/{name}", h.getRebalancer)
}

// createRebalancer stores a new rebalancer created at testNow: 409 when
// the name is taken, 422 without workloads.
func (h *fakeHub) createRebalancer(w http.ResponseWriter, r *http.Request) {
	var rb appsv1alpha1.WorkloadRebalancer
	if err := json.NewDecoder(r.Body).Decode(&rb); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	if len(rb.Spec.Workloads) == 0 {
		st := apierrors.NewInvalid(schema.GroupKind{Group: appsv1alpha1.GroupName, Kind: appsv1alpha1.KindWorkloadRebalancer}, rb.Name,
			field.ErrorList{field.Required(field.NewPath("spec", "workloads"), "at least one workload")}).ErrStatus
		st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
		writeJSON(w, http.StatusUnprocessableEntity, st)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.rebalancers[rb.Name]; ok {
		writeStatus(w, http.StatusConflict, metav1.StatusReasonAlreadyExists,
			fmt.Sprintf("workloadrebalancers.%s %q already exists", appsv1alpha1.GroupName, rb.Name))
		return
	}
	h.rv++
	rb.TypeMeta = appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancer)
	rb.ResourceVersion, rb.Generation, rb.UID = strconv.Itoa(h.rv), 1, types.UID("uid-"+rb.Name)
	rb.CreationTimestamp = metav1.NewTime(testNow)
	h.rebalancers[rb.Name] = &rb
	writeJSON(w, http.StatusCreated, rb)
}

func (h *fakeHub) listRebalancers(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := appsv1alpha1.WorkloadRebalancerList{TypeMeta: appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancerList), Items: []appsv1alpha1.WorkloadRebalancer{}}
	for _, name := range sortedKeys(h.rebalancers) {
		list.Items = append(list.Items, *h.rebalancers[name])
	}
	writeJSON(w, http.StatusOK, list)
}

func (h *fakeHub) getRebalancer(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rb, ok := h.rebalancers[r.PathValue("name")]
	if !ok {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("workloadrebalancers.%s %q not found", appsv1alpha1.GroupName, r.PathValue("name")))
		return
	}
	if h.rebalance != nil {
		h.rebalance(rb)
	}
	writeJSON(w, http.StatusOK, rb)
}

// addRebalancer stores a rebalancer as the hub would serve it.
func (h *fakeHub) addRebalancer(rb appsv1alpha1.WorkloadRebalancer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rb.TypeMeta = appsv1alpha1.TypeMeta(appsv1alpha1.KindWorkloadRebalancer)
	h.rv++
	rb.ResourceVersion = strconv.Itoa(h.rv)
	h.rebalancers[rb.Name] = &rb
}

func (h *fakeHub) storedRebalancer(t *testing.T, name string) appsv1alpha1.WorkloadRebalancer {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	rb, ok := h.rebalancers[name]
	if !ok {
		t.Fatalf("fake hub has no rebalancer %q", name)
	}
	return *rb.DeepCopy()
}

// finishAfter plays the hub's controller: on the n-th GET of a rebalancer
// every workload named in bound succeeds and the others fail with
// ReferencedBindingNotFound.
func finishAfter(n int, bound ...string) func(rb *appsv1alpha1.WorkloadRebalancer) {
	gets := map[string]int{}
	return func(rb *appsv1alpha1.WorkloadRebalancer) {
		gets[rb.Name]++
		if gets[rb.Name] < n {
			return
		}
		rb.Status = appsv1alpha1.WorkloadRebalancerStatus{ObservedGeneration: rb.Generation, FinishTime: ptr(metav1.NewTime(testNow))}
		for _, wl := range rb.Spec.Workloads {
			o := appsv1alpha1.ObservedWorkload{Workload: wl, Result: appsv1alpha1.RebalanceFailed, Reason: appsv1alpha1.RebalanceObjectNotFound}
			for _, b := range bound {
				if b == wl.Name {
					o.Result, o.Reason = appsv1alpha1.RebalanceSuccessful, ""
				}
			}
			rb.Status.ObservedWorkloads = append(rb.Status.ObservedWorkloads, o)
		}
		slices.SortFunc(rb.Status.ObservedWorkloads, func(a, b appsv1alpha1.ObservedWorkload) int {
			return cmp.Or(cmp.Compare(a.Workload.APIVersion, b.Workload.APIVersion), cmp.Compare(a.Workload.Kind, b.Workload.Kind),
				cmp.Compare(a.Workload.Namespace, b.Workload.Namespace), cmp.Compare(a.Workload.Name, b.Workload.Name))
		})
	}
}
