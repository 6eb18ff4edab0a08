package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/api/client/clientset/versioned"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// fieldManager names the dashboard's writes in managedFields.
const fieldManager = "flotilla-dashboard"

// maxActionBody bounds an action's request body.
const maxActionBody = 16 << 10

// userConfig is the hub API's address and CA with the user's token: the
// API server authenticates and authorizes the action as that user and its
// audit log names them.
func (d *Dashboard) userConfig(u *user) *rest.Config {
	cfg := rest.AnonymousClientConfig(d.cfg.API)
	cfg.BearerToken = u.token
	cfg.UserAgent = fieldManager
	return cfg
}

func (d *Dashboard) userClients(u *user) (flotillaclient.Interface, kubernetes.Interface, error) {
	cfg := d.userConfig(u)
	f, err := flotillaclient.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("client as %s: %w", u.id.User, err)
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("client as %s: %w", u.id.User, err)
	}
	return f, k, nil
}

// readAction decodes an action's JSON body. Only application/json is
// taken: a cross-site form cannot send it without a preflight.
func readAction(r *http.Request, v any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return fmt.Errorf("request body must be application/json")
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// updateCluster changes a cluster as the user, retried on conflicts.
func (d *Dashboard) updateCluster(ctx context.Context, u *user, name string, change func(*v1alpha1.Cluster) error) error {
	f, _, err := d.userClients(u)
	if err != nil {
		return err
	}
	clusters := f.FlotillaV1alpha1().Clusters()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := change(c); err != nil {
			return err
		}
		_, err = clusters.Update(ctx, c, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
}

// cordon serves POST .../clusters/{name}/cordon {"cordon": bool}.
func (d *Dashboard) cordon(w http.ResponseWriter, r *http.Request, u *user) {
	var req struct {
		Cordon bool `json:"cordon"`
	}
	if err := readAction(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	name := r.PathValue("name")
	err := d.updateCluster(r.Context(), u, name, func(c *v1alpha1.Cluster) error {
		c.Spec.Unschedulable = req.Cordon
		return nil
	})
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("cordon %s as %s: %w", name, u.id.User, err))
		return
	}
	d.cfg.Logger.Info("dashboard: cluster cordon changed", "cluster", name, "cordon", req.Cordon, "user", u.id.User)
	writeJSON(w, http.StatusOK, map[string]any{"cluster": name, "cordoned": req.Cordon})
}

// taint serves POST .../clusters/{name}/taints {"add"|"remove": taint}.
// The hub's own cluster.flotilla.io/* taints are not the user's to change.
func (d *Dashboard) taint(w http.ResponseWriter, r *http.Request, u *user) {
	var req struct {
		Add    *TaintView `json:"add,omitempty"`
		Remove *TaintView `json:"remove,omitempty"`
	}
	if err := readAction(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	t := req.Add
	if t == nil {
		t = req.Remove
	}
	if t == nil || (req.Add != nil && req.Remove != nil) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("give exactly one of add and remove"))
		return
	}
	if strings.HasPrefix(t.Key, "cluster.flotilla.io/") {
		writeError(w, http.StatusBadRequest, fmt.Errorf("taint %s: the hub manages cluster.flotilla.io/ taints", t.Key))
		return
	}
	effect := corev1.TaintEffect(t.Effect)
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("taint effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
		return
	}
	name := r.PathValue("name")
	err := d.updateCluster(r.Context(), u, name, func(c *v1alpha1.Cluster) error {
		kept := c.Spec.Taints[:0:0]
		for _, have := range c.Spec.Taints {
			if have.Key != t.Key || have.Effect != effect {
				kept = append(kept, have)
			}
		}
		if req.Add != nil {
			now := metav1.Now()
			kept = append(kept, corev1.Taint{Key: t.Key, Value: t.Value, Effect: effect, TimeAdded: &now})
		}
		c.Spec.Taints = kept
		return nil
	})
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("taint %s as %s: %w", name, u.id.User, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"cluster": name})
}

// rebalance serves POST .../rebalance {"apiVersion","kind","namespace","name"}:
// a WorkloadRebalancer for one workload, deleted 5 minutes after it
// finished.
func (d *Dashboard) rebalance(w http.ResponseWriter, r *http.Request, u *user) {
	var ref appsv1alpha1.ObjectReference
	if err := readAction(r, &ref); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	f, _, err := d.userClients(u)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	ttl := int32(300)
	created, err := f.AppsV1alpha1().WorkloadRebalancers().Create(r.Context(), &appsv1alpha1.WorkloadRebalancer{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "dashboard-rebalance-"},
		Spec:       appsv1alpha1.WorkloadRebalancerSpec{Workloads: []appsv1alpha1.ObjectReference{ref}, TTLSecondsAfterFinished: &ttl},
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("rebalance %s/%s as %s: %w", ref.Kind, ref.Name, u.id.User, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"workloadRebalancer": created.Name})
}

// purge serves POST .../purge {"namespace","name","cluster"}: a
// PurgeRequest ending the binding's eviction task from cluster.
func (d *Dashboard) purge(w http.ResponseWriter, r *http.Request, u *user) {
	var req struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Cluster   string `json:"cluster"`
	}
	if err := readAction(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.Name == "" || req.Cluster == "" {
		writeError(w, http.StatusBadRequest, fmt.Errorf("purge needs the binding's name and the cluster"))
		return
	}
	f, _, err := d.userClients(u)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	prefix := "purge-" + req.Name + "-" + req.Cluster
	if len(prefix) > 200 {
		prefix = strings.TrimRight(prefix[:200], ".-")
	}
	created, err := f.FlotillaV1alpha1().PurgeRequests().Create(r.Context(), &v1alpha1.PurgeRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
		Spec:       v1alpha1.PurgeRequestSpec{Binding: v1alpha1.BindingReference{Namespace: req.Namespace, Name: req.Name}, Cluster: req.Cluster},
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("purge %s from %s as %s: %w", req.Name, req.Cluster, u.id.User, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"purgeRequest": created.Name})
}

// EventView is one event of a cluster's timeline.
type EventView struct {
	Time    int64  `json:"time"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int32  `json:"count,omitempty"`
}

// events serves the cluster's events, read as the user (so RBAC on events
// applies), newest first.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, u *user) {
	_, k, err := d.userClients(u)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	name := r.PathValue("name")
	sel := fields.Set{"involvedObject.kind": v1alpha1.KindCluster, "involvedObject.name": name}.AsSelector().String()
	list, err := k.CoreV1().Events(metav1.NamespaceAll).List(r.Context(), metav1.ListOptions{FieldSelector: sel, Limit: 500})
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("events of %s as %s: %w", name, u.id.User, err))
		return
	}
	out := make([]EventView, 0, len(list.Items))
	for _, e := range list.Items {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		out = append(out, EventView{Time: millis(t), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time > out[j].Time })
	writeJSON(w, http.StatusOK, out)
}
