package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/validation"
)

// rebalancersPath is the collection of WorkloadRebalancers.
const rebalancersPath = "/apis/" + appsv1alpha1.GroupName + "/" + appsv1alpha1.Version + "/workloadrebalancers"

// rebalancerRoutes serves list, get and create of WorkloadRebalancers
// (apply and delete take them too).
func (a *apiServer) rebalancerRoutes(mux *http.ServeMux) {
	routeKindIn(mux, appsv1alpha1.SchemeGroupVersion, "workloadrebalancers", appsv1alpha1.KindWorkloadRebalancerList, a.objects.Rebalancers)
	mux.HandleFunc("POST "+rebalancersPath, a.createRebalancer)
}

// createRebalancer stores a new WorkloadRebalancer: 201 with the stored
// object, 409 AlreadyExists when the name is taken, 422 Invalid with a
// cause per bad field.
func (a *apiServer) createRebalancer(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("body over %d bytes", maxRequestBody)))
			return
		}
		writeError(w, apierrors.NewBadRequest("reading the body: "+err.Error()))
		return
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil {
		writeError(w, apierrors.NewBadRequest("body must be a WorkloadRebalancer: "+err.Error()))
		return
	}
	if !validation.IsRebalancerAPIVersion(tm.APIVersion) || tm.Kind != appsv1alpha1.KindWorkloadRebalancer {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("body must be a WorkloadRebalancer of %s (or %s), not %s %q",
			appsv1alpha1.APIVersion, appsv1alpha1.KarmadaAPIVersion, tm.APIVersion, tm.Kind)))
		return
	}
	gk := schema.GroupKind{Group: appsv1alpha1.GroupName, Kind: appsv1alpha1.KindWorkloadRebalancer}
	rb, errs := validation.WorkloadRebalancer(body)
	if len(errs) > 0 {
		name := ""
		if rb != nil {
			name = rb.Name
		}
		writeError(w, apierrors.NewInvalid(gk, name, errs))
		return
	}
	rb.Generation = 1
	created, err := a.objects.Rebalancers.Create(r.Context(), rb)
	if err != nil {
		writeError(w, err)
		return
	}
	a.logger.Info("applied", "kind", appsv1alpha1.KindWorkloadRebalancer, "name", created.Name, "action", "created", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusCreated, created)
}
