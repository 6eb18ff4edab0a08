package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/store"
)

// purgeRoutes serves the end of a graceful eviction task by hand: the way
// out of purgeMode Never, and of any task an operator does not want to
// wait for. The binding controller then removes the old copy.
func (a *apiServer) purgeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+groupPath+"/namespaces/{namespace}/resourcebindings/{name}/purge", func(w http.ResponseWriter, req *http.Request) {
		purge(w, req, a, a.objects.Bindings, req.PathValue("namespace"), func(b *v1alpha1.ResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec })
	})
	mux.HandleFunc("POST "+groupPath+"/clusterresourcebindings/{name}/purge", func(w http.ResponseWriter, req *http.Request) {
		purge(w, req, a, a.objects.ClusterBindings, "", func(b *v1alpha1.ClusterResourceBinding) *v1alpha1.ResourceBindingSpec { return &b.Spec })
	})
}

// maxPurgeAttempts bounds retries when controllers update the binding at
// the same time.
const maxPurgeAttempts = 5

// purge removes the eviction task from ?cluster= of a binding and answers
// with the binding as stored.
func purge[T any, PT store.Object[T]](w http.ResponseWriter, req *http.Request, a *apiServer, r *store.Resource[T, PT], namespace string,
	specOf func(PT) *v1alpha1.ResourceBindingSpec) {
	name, cluster := req.PathValue("name"), req.URL.Query().Get("cluster")
	if cluster == "" {
		writeError(w, apierrors.NewBadRequest("query parameter cluster is required: the cluster whose eviction task ends"))
		return
	}
	stored, task, err := endTask(req.Context(), r, namespace, name, cluster, specOf)
	if err != nil {
		writeError(w, err)
		return
	}
	spec := specOf(stored)
	message := fmt.Sprintf("eviction from %s ended by hand (was %s, purge mode %s); its copy there is removed", cluster, task.Reason, v1alpha1.NormalPurgeMode(task.PurgeMode))
	a.recorder.Event(controller.BindingRef(stored), corev1.EventTypeNormal, "EvictionTaskEnded", message)
	a.recorder.Event(controller.TemplateRef(spec.Resource), corev1.EventTypeNormal, "EvictionTaskEnded", message)
	a.logger.Info("eviction task ended by hand", "binding", controller.Key(namespace, name), "cluster", cluster, "remote", req.RemoteAddr)
	writeJSON(w, http.StatusOK, stored)
}

// endTask removes the task with optimistic concurrency, retrying on
// conflicts.
func endTask[T any, PT store.Object[T]](ctx context.Context, r *store.Resource[T, PT], namespace, name, cluster string,
	specOf func(PT) *v1alpha1.ResourceBindingSpec) (PT, v1alpha1.GracefulEvictionTask, error) {
	for attempt := 1; ; attempt++ {
		obj, err := r.Get(ctx, namespace, name)
		if err != nil {
			return nil, v1alpha1.GracefulEvictionTask{}, err
		}
		spec := specOf(obj)
		i := slices.IndexFunc(spec.GracefulEvictionTasks, func(t v1alpha1.GracefulEvictionTask) bool { return t.FromCluster == cluster })
		if i < 0 {
			return nil, v1alpha1.GracefulEvictionTask{}, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "evictiontasks"},
				fmt.Sprintf("%s (binding %s has no eviction task from that cluster)", cluster, controller.Key(namespace, name)))
		}
		task := spec.GracefulEvictionTasks[i]
		spec.GracefulEvictionTasks = slices.Delete(slices.Clone(spec.GracefulEvictionTasks), i, i+1)
		updated, err := r.Update(ctx, obj)
		if apierrors.IsConflict(err) && attempt < maxPurgeAttempts {
			continue
		}
		return updated, task, err
	}
}
