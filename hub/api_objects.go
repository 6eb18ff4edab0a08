package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

// maxApplyBody bounds apply and delete requests.
const maxApplyBody = 16 << 20

const groupPath = "/apis/" + v1alpha1.GroupName + "/" + v1alpha1.Version

// objectRoutes serves apply, delete and reads of propagation objects.
func (a *apiServer) objectRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+groupPath+"/apply", a.apply)
	mux.HandleFunc("POST "+groupPath+"/delete", a.deleteItems)
	mux.HandleFunc("GET "+groupPath+"/resources", a.listTemplates)
	routeKind(mux, "propagationpolicies", v1alpha1.KindPropagationPolicyList, a.objects.Policies)
	routeKind(mux, "clusterpropagationpolicies", v1alpha1.KindClusterPropagationPolicyList, a.objects.ClusterPolicies)
	routeKind(mux, "resourcebindings", v1alpha1.KindResourceBindingList, a.objects.Bindings)
	routeKind(mux, "clusterresourcebindings", v1alpha1.KindClusterResourceBindingList, a.objects.ClusterBindings)
	routeKind(mux, "works", v1alpha1.KindWorkList, a.objects.Works)
	a.purgeRoutes(mux)
	a.rebalancerRoutes(mux)
}

// list is the JSON shape of every list the API returns.
type list[PT any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []PT `json:"items"`
}

// routeKind serves list (all namespaces, or one) and get of a typed kind
// of group flotilla.io.
func routeKind[T any, PT store.Object[T]](mux *http.ServeMux, resource, listKind string, r *store.Resource[T, PT]) {
	routeKindIn(mux, v1alpha1.SchemeGroupVersion, resource, listKind, r)
}

// routeKindIn serves list and get of a typed kind of group version gv.
func routeKindIn[T any, PT store.Object[T]](mux *http.ServeMux, gv schema.GroupVersion, resource, listKind string, r *store.Resource[T, PT]) {
	groupPath := "/apis/" + gv.String()
	listIn := func(w http.ResponseWriter, req *http.Request, namespace string) {
		items, rev, err := r.List(req.Context(), namespace)
		if err != nil {
			writeError(w, err)
			return
		}
		out := list[PT]{TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: listKind}, ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(rev)}, Items: items}
		writeJSON(w, http.StatusOK, out)
	}
	get := func(w http.ResponseWriter, req *http.Request, namespace string) {
		obj, err := r.Get(req.Context(), namespace, req.PathValue("name"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, obj)
	}
	mux.HandleFunc("GET "+groupPath+"/"+resource, func(w http.ResponseWriter, req *http.Request) { listIn(w, req, "") })
	mux.HandleFunc("GET "+groupPath+"/namespaces/{namespace}/"+resource, func(w http.ResponseWriter, req *http.Request) {
		listIn(w, req, req.PathValue("namespace"))
	})
	mux.HandleFunc("GET "+groupPath+"/namespaces/{namespace}/"+resource+"/{name}", func(w http.ResponseWriter, req *http.Request) {
		get(w, req, req.PathValue("namespace"))
	})
	mux.HandleFunc("GET "+groupPath+"/"+resource+"/{name}", func(w http.ResponseWriter, req *http.Request) { get(w, req, "") })
}

// itemsRequest is the body of apply and delete: a v1 List.
type itemsRequest struct {
	metav1.TypeMeta `json:",inline"`
	Items           []json.RawMessage `json:"items"`
}

func readItems(w http.ResponseWriter, r *http.Request) ([]json.RawMessage, bool) {
	var body itemsRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxApplyBody)).Decode(&body); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("body over %d bytes", maxApplyBody)))
			return nil, false
		}
		writeError(w, apierrors.NewBadRequest("body must be a List of objects: "+err.Error()))
		return nil, false
	}
	if body.Kind != "List" {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("body must be a List of objects, not kind %q", body.Kind)))
		return nil, false
	}
	return body.Items, true
}

// itemsResult is the answer of apply and delete.
type itemsResult struct {
	metav1.TypeMeta `json:",inline"`
	Items           []objects.Outcome `json:"items"`
}

func (a *apiServer) apply(w http.ResponseWriter, r *http.Request) {
	items, ok := readItems(w, r)
	if !ok {
		return
	}
	dryRun := r.URL.Query().Get("dryRun") == "true"
	outcomes, err := a.objects.Apply(r.Context(), items, r.URL.Query().Get("namespace"), dryRun)
	if err != nil {
		writeError(w, err)
		return
	}
	if !dryRun {
		for _, o := range outcomes {
			if o.Action != objects.ActionUnchanged {
				a.logger.Info("applied", "kind", o.Kind, "namespace", o.Namespace, "name", o.Name, "action", o.Action, "remote", r.RemoteAddr)
			}
		}
	}
	writeJSON(w, http.StatusOK, itemsResult{TypeMeta: v1alpha1.TypeMeta("ApplyResult"), Items: outcomes})
}

func (a *apiServer) deleteItems(w http.ResponseWriter, r *http.Request) {
	items, ok := readItems(w, r)
	if !ok {
		return
	}
	outcomes, err := a.objects.Delete(r.Context(), items, r.URL.Query().Get("namespace"))
	if err != nil {
		writeError(w, err)
		return
	}
	for _, o := range outcomes {
		if o.Action == objects.ActionDeleted {
			a.logger.Info("deleted", "kind", o.Kind, "namespace", o.Namespace, "name", o.Name, "remote", r.RemoteAddr)
		}
	}
	writeJSON(w, http.StatusOK, itemsResult{TypeMeta: v1alpha1.TypeMeta("DeleteResult"), Items: outcomes})
}

// listTemplates lists templates, filtered by apiVersion, kind, namespace
// and name query parameters.
func (a *apiServer) listTemplates(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	templates, rev, err := a.objects.Templates.List(r.Context(), "")
	if err != nil {
		writeError(w, err)
		return
	}
	out := list[*unstructured.Unstructured]{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(rev)}, Items: []*unstructured.Unstructured{}}
	for _, u := range templates {
		if !matches(q.Get("kind"), u.GetKind()) || !matches(q.Get("namespace"), u.GetNamespace()) || !matches(q.Get("name"), u.GetName()) {
			continue
		}
		if want := q.Get("apiVersion"); want != "" {
			wantGV, _ := schema.ParseGroupVersion(want)
			if u.GroupVersionKind().Group != wantGV.Group {
				continue
			}
		}
		out.Items = append(out.Items, u)
	}
	writeJSON(w, http.StatusOK, out)
}

func matches(want, got string) bool { return want == "" || want == got }
