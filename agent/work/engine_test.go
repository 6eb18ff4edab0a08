package work

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-io/flotilla/protocol"
)

func nsRefOf(name string) objectRef {
	return objectRef{Version: "v1", Kind: "Namespace", Resource: "namespaces", Name: name}
}

func deployRefOf(namespace, name string) objectRef {
	return objectRef{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: namespace, Name: name}
}

func cmRefOf(namespace, name string) objectRef {
	return objectRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: namespace, Name: name}
}

// identities compares manifest results by what they name only.
var identities = cmpopts.IgnoreFields(protocol.ManifestResult{}, "Health", "Message", "Status")

// TestEngineWithMemberCluster runs the engine against a real member cluster,
// one story from apply to delete and restart; each step builds on the last.
func TestEngineWithMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real member cluster")
	}
	c := startCluster(t)
	s := &story{c: c, e: c.startEngine(t), web: deployRefOf("demo", "web"), conf: cmRefOf("demo", "web-config")}
	t.Run("apply a Deployment and a ConfigMap into a namespace that does not exist", s.applyIntoNewNamespace)
	t.Run("a new generation changes the image", s.changeImage)
	t.Run("a generation without the ConfigMap prunes it", s.pruneDropped)
	t.Run("objects made by hand are never touched", s.leaveHandMadeAlone)
	t.Run("delete removes the objects and the record, not the namespace", s.deleteWork)
	t.Run("a CRD and its custom resource in one Work", s.applyCRD)
	t.Run("a kind the cluster does not serve fails, is retried, and a newer generation ends it", s.retryFailure)
	t.Run("a Job that completes is Healthy", s.completeJob)
	t.Run("a restarted engine knows its Works from their records", s.restart)
}

// story is the state the steps of TestEngineWithMemberCluster share.
type story struct {
	c         *testCluster
	e         *runningEngine
	web, conf objectRef // the Work "web"'s Deployment and ConfigMap
}

// applyIntoNewNamespace: apply a Deployment and a ConfigMap into a namespace
// that does not exist.
func (s *story) applyIntoNewNamespace(t *testing.T) {
	c, e, web, conf := s.c, s.e, s.web, s.conf
	demo := nsRefOf("demo")
	record := cmRefOf(DefaultSystemNamespace, "web")
	e.Upsert(upsert(t, "web", 1, deployment("web", "demo", "nginx:1.27", 3), configMap("web-config", "demo", map[string]any{"mode": "blue"})))
	a := e.applied(t, "web", 1)
	if !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	want := []protocol.ManifestResult{web.result(0), conf.result(1)}
	if diff := cmp.Diff(want, a.Manifests, identities); diff != "" {
		t.Errorf("manifests (-want +got):\n%s", diff)
	}
	st := e.status(t, "web", "the Deployment Healthy with 3 ready replicas", func(st *protocol.WorkStatus) bool {
		return st.Manifests[0].Health == protocol.HealthHealthy && statusField(t, st.Manifests[0], "readyReplicas") == 3
	})
	if st.Generation != 1 || st.Manifests[1].Health != protocol.HealthHealthy {
		t.Errorf("status = %+v, want generation 1 with a Healthy ConfigMap", st)
	}
	checkLabels(t, c.mustGet(t, web), map[string]string{LabelManagedBy: ManagedBy, LabelWork: "web", "app": ""})
	if got := c.mustGet(t, web).GetAnnotations()[AnnotationBinding]; got != "default/web" {
		t.Errorf("binding annotation = %q, want default/web", got)
	}
	checkLabels(t, c.mustGet(t, demo), map[string]string{LabelManagedBy: ManagedBy})
	if gen, _, _ := unstructured.NestedString(c.mustGet(t, record).Object, "data", keyGeneration); gen != "1" {
		t.Errorf("record generation = %q, want 1", gen)
	}
}

// changeImage: a new generation changes the image.
func (s *story) changeImage(t *testing.T) {
	c, e, web := s.c, s.e, s.web
	e.Upsert(upsert(t, "web", 2, deployment("web", "demo", "nginx:1.28", 3), configMap("web-config", "demo", map[string]any{"mode": "blue"})))
	if a := e.applied(t, "web", 2); !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	containers, _, _ := unstructured.NestedSlice(c.mustGet(t, web).Object, "spec", "template", "spec", "containers")
	if image := containers[0].(map[string]any)["image"]; image != "nginx:1.28" {
		t.Errorf("image = %v, want nginx:1.28", image)
	}
}

// pruneDropped: a generation without the ConfigMap prunes it.
func (s *story) pruneDropped(t *testing.T) {
	c, e, web, conf := s.c, s.e, s.web, s.conf
	uid := c.mustGet(t, web).GetUID()
	e.Upsert(upsert(t, "web", 3, deployment("web", "demo", "nginx:1.28", 3)))
	if a := e.applied(t, "web", 3); !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	if obj := c.get(t, conf); obj != nil {
		t.Errorf("%s still exists after the prune", conf)
	}
	if got := c.mustGet(t, web).GetUID(); got != uid {
		t.Errorf("the Deployment was replaced (UID %s, was %s)", got, uid)
	}
}

// leaveHandMadeAlone: objects made by hand are never touched.
func (s *story) leaveHandMadeAlone(t *testing.T) {
	c, e := s.c, s.e
	hand, bystander, ok := deployRefOf("demo", "hand"), cmRefOf("demo", "bystander"), cmRefOf("demo", "clash-ok")
	c.create(t, hand, deployment("hand", "demo", "httpd", 1))
	handMade := c.waitSettled(t, hand)
	c.create(t, bystander, configMap("bystander", "demo", map[string]any{"owner": "operator"}))
	e.Upsert(upsert(t, "clash", 1, deployment("hand", "demo", "nginx:1.27", 2), configMap("clash-ok", "demo", nil)))

	a := e.applied(t, "clash", 1)
	const notManaged = "apps/v1 Deployment demo/hand exists and is not managed by this Work; not touched"
	if a.Applied || !strings.Contains(a.Message, notManaged) {
		t.Fatalf("applied %v with message %q, want a failure saying %q", a.Applied, a.Message, notManaged)
	}
	if m := a.Manifests[0]; m.Health != protocol.HealthUnknown || m.Message != notManaged {
		t.Errorf("result of the clashing manifest = %+v", m)
	}
	if m := a.Manifests[1]; m.Health != protocol.HealthHealthy || c.get(t, ok) == nil {
		t.Errorf("the other manifest was not applied: %+v", m)
	}
	if retry := e.applied(t, "clash", 1); retry.Applied {
		t.Errorf("the retry applied: %+v", retry)
	}
	e.Delete("clash")
	e.deleted(t, "clash")
	after := c.mustGet(t, hand)
	if after.GetResourceVersion() != handMade.GetResourceVersion() {
		t.Errorf("the hand-made Deployment changed: resourceVersion %s, was %s", after.GetResourceVersion(), handMade.GetResourceVersion())
	}
	for _, f := range after.GetManagedFields() {
		if f.Manager == FieldManager {
			t.Errorf("the agent manages fields of the hand-made Deployment: %+v", f)
		}
	}
	if c.get(t, ok) != nil {
		t.Errorf("%s survived the delete of its Work", ok)
	}
}

// deleteWork: delete removes the objects and the record, not the namespace.
func (s *story) deleteWork(t *testing.T) {
	c, e, web := s.c, s.e, s.web
	demo := nsRefOf("demo")
	record := cmRefOf(DefaultSystemNamespace, "web")
	e.Delete("web")
	e.deleted(t, "web")
	for _, ref := range []objectRef{web, record} {
		if c.get(t, ref) != nil {
			t.Errorf("%s still exists after WorkDeleted", ref)
		}
	}
	if ns := c.mustGet(t, demo); ns.GetDeletionTimestamp() != nil {
		t.Errorf("the namespace the agent created is being deleted")
	}
	for _, ref := range []objectRef{deployRefOf("demo", "hand"), cmRefOf("demo", "bystander")} {
		if c.get(t, ref) == nil {
			t.Errorf("hand-made %s was deleted with the Work", ref)
		}
	}
	if inv := e.Inventory(); len(inv) != 0 {
		t.Errorf("inventory after the deletes = %v, want none", inv)
	}
}

// applyCRD: a CRD and its custom resource in one Work.
func (s *story) applyCRD(t *testing.T) {
	c, e := s.c, s.e
	crd := objectRef{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition",
		Resource: "customresourcedefinitions", Name: "widgets.example.com"}
	w := objectRef{Group: "example.com", Version: "v1", Kind: "Widget", Resource: "widgets", Namespace: "gadgets", Name: "w1"}
	// The custom resource comes first: the engine must order them.
	e.Upsert(upsert(t, "widgets", 1, widget("w1", "gadgets"), widgetCRD()))
	a := e.applied(t, "widgets", 1)
	if !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	if diff := cmp.Diff([]protocol.ManifestResult{w.result(0), crd.result(1)}, a.Manifests, identities); diff != "" {
		t.Errorf("manifests (-want +got):\n%s", diff)
	}
	if size, _, _ := unstructured.NestedInt64(c.mustGet(t, w).Object, "spec", "size"); size != 3 {
		t.Errorf("widget size = %d, want 3", size)
	}
	e.Delete("widgets")
	e.deleted(t, "widgets")
	for _, ref := range []objectRef{w, crd} {
		if c.get(t, ref) != nil {
			t.Errorf("%s still exists after WorkDeleted", ref)
		}
	}
}

// retryFailure: a kind the cluster does not serve fails, is retried, and a
// newer generation ends it.
func (s *story) retryFailure(t *testing.T) {
	c, e := s.c, s.e
	gadget := map[string]any{"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g", "namespace": "demo"}}
	e.Upsert(upsert(t, "bad", 1, configMap("bad-ok", "demo", nil), gadget))
	first := e.applied(t, "bad", 1)
	const why = "example.org/v1 Gadget demo/g: the cluster does not serve this kind"
	if first.Applied || !strings.Contains(first.Message, why) || !strings.Contains(first.Manifests[1].Message, why) {
		t.Fatalf("applied %v with message %q, want a failure saying %q", first.Applied, first.Message, why)
	}
	if again := e.applied(t, "bad", 1); again.Applied || again.Message != first.Message {
		t.Errorf("retry = %+v, want the same failure", again)
	}
	if c.get(t, cmRefOf("demo", "bad-ok")) == nil {
		t.Errorf("the good manifest of a failing Work was not applied")
	}
	e.Upsert(upsert(t, "bad", 2, configMap("bad-ok", "demo", nil)))
	if a := e.applied(t, "bad", 2); !a.Applied {
		t.Fatalf("generation 2 not applied: %s", a.Message)
	}
	e.Delete("bad")
	e.deleted(t, "bad")
}

// completeJob: a Job that completes is Healthy.
func (s *story) completeJob(t *testing.T) {
	e := s.e
	e.Upsert(upsert(t, "job", 1, job("once", "demo")))
	if a := e.applied(t, "job", 1); !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	e.status(t, "job", "the Job complete", func(st *protocol.WorkStatus) bool {
		m := st.Manifests[0]
		return m.Health == protocol.HealthHealthy && m.Message == "complete" && statusField(t, m, "succeeded") == 1
	})
	e.Delete("job")
	e.deleted(t, "job")
}

// restart: a restarted engine knows its Works from their records.
func (s *story) restart(t *testing.T) {
	c, e := s.c, s.e
	keep, keepConf := deployRefOf("demo", "keep"), cmRefOf("demo", "keep")
	e.Upsert(upsert(t, "keep", 4, deployment("keep", "demo", "nginx:1.27", 1), configMap("keep", "demo", nil)))
	if a := e.applied(t, "keep", 4); !a.Applied {
		t.Fatalf("not applied: %s", a.Message)
	}
	e.stop(t)

	restarted := c.startEngine(t)
	if diff := cmp.Diff([]protocol.WorkRef{{Name: "keep", Generation: 4}}, restarted.Inventory()); diff != "" {
		t.Errorf("inventory after restart (-want +got):\n%s", diff)
	}
	statuses := restarted.Statuses()
	if len(statuses) != 1 || statuses[0].Generation != 4 {
		t.Fatalf("statuses after restart = %+v, want one for generation 4", statuses)
	}
	if diff := cmp.Diff([]protocol.ManifestResult{keep.result(0), keepConf.result(1)}, statuses[0].Manifests, identities); diff != "" {
		t.Errorf("manifests after restart (-want +got):\n%s", diff)
	}
	restarted.Delete("keep")
	restarted.deleted(t, "keep")
	for _, ref := range []objectRef{keep, keepConf} {
		if c.get(t, ref) != nil {
			t.Errorf("%s still exists after WorkDeleted", ref)
		}
	}
}

// statusField reads one key status field of a manifest result, -1 if absent.
func statusField(t *testing.T, r protocol.ManifestResult, field string) int64 {
	t.Helper()
	var fields map[string]int64
	if len(r.Status) == 0 {
		return -1
	}
	if err := json.Unmarshal(r.Status, &fields); err != nil {
		t.Fatalf("status %s: %v", r.Status, err)
	}
	if v, ok := fields[field]; ok {
		return v
	}
	return -1
}

// checkLabels checks that obj has the wanted labels; an empty wanted value
// means the label must be absent.
func checkLabels(t *testing.T, obj *unstructured.Unstructured, want map[string]string) {
	t.Helper()
	for key, value := range want {
		got, ok := obj.GetLabels()[key]
		if value == "" && ok || value != "" && got != value {
			t.Errorf("%s %s: label %s = %q, want %q", obj.GetKind(), obj.GetName(), key, got, value)
		}
	}
}
