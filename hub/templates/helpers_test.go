package templates

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/flotilla-io/flotilla/hub/controller"
	"github.com/flotilla-io/flotilla/hub/names"
	"github.com/flotilla-io/flotilla/internal/kube"
	"github.com/flotilla-io/flotilla/test/hubapi"
)

func TestMain(m *testing.M) { os.Exit(hubapi.Main(m)) }

// waitTimeout bounds every wait for the Source to catch up.
const waitTimeout = 30 * time.Second

// event is one handler call.
type event struct{ old, cur *unstructured.Unstructured }

func (e event) String() string {
	name := func(u *unstructured.Unstructured) string {
		if u == nil {
			return "nil"
		}
		return names.TemplateKey(u) + "@" + u.GetAPIVersion() + "#" + u.GetResourceVersion()
	}
	return name(e.old) + " -> " + name(e.cur)
}

// recorder records handler calls for tests to wait on.
type recorder struct {
	mu     sync.Mutex
	events []event
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (r *recorder) handle(old, cur *unstructured.Unstructured) {
	r.mu.Lock()
	r.events = append(r.events, event{old, cur})
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// wait returns the first event at index from or later that satisfies ok,
// and the index after it.
func (r *recorder) wait(t *testing.T, from int, what string, ok func(event) bool) (event, int) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		events := r.events
		r.mu.Unlock()
		for i := from; i < len(events); i++ {
			if ok(events[i]) {
				return events[i], i + 1
			}
		}
		from = max(from, len(events))
		select {
		case <-r.signal:
		case <-timeout.C:
			t.Fatalf("no event %s within %v", what, waitTimeout)
		}
	}
}

// all returns every event so far.
func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// about reports events of the template with key: added, updated or deleted.
func added(key string) func(event) bool {
	return func(e event) bool { return e.old == nil && e.cur != nil && names.TemplateKey(e.cur) == key }
}

func updated(key string, ok func(old, cur *unstructured.Unstructured) bool) func(event) bool {
	return func(e event) bool {
		return e.old != nil && e.cur != nil && names.TemplateKey(e.cur) == key && ok(e.old, e.cur)
	}
}

func deleted(key string) func(event) bool {
	return func(e event) bool { return e.old != nil && e.cur == nil && names.TemplateKey(e.old) == key }
}

// fixture is a running Source over the test binary's API server.
type fixture struct {
	env     *hubapi.Env
	clients *kube.Clients
	crds    apiextensionsclient.Interface
	source  *Source
	events  *recorder
}

// newFixture builds a Source and a recorder of its handler calls; start
// runs it.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := hubapi.Start(t)
	clients, err := kube.NewClients(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds, err := apiextensionsclient.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, clients: clients, crds: crds, events: newRecorder()}
	f.source = New(clients, crds, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.source.AddHandler(f.events.handle)
	return f
}

// start runs the Source until the test ends and waits until it synced.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if !controller.StartAndSync(ctx, f.source) {
		t.Fatal("templates did not sync")
	}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

// cleanupTimeout bounds deletions at test end.
const cleanupTimeout = 30 * time.Second

// systemNamespace creates a namespace whose name starts with prefix
// (flotilla-, kube-), which hubapi's Namespace cannot make, and deletes it
// at test end with the ConfigMaps in it (the only kind tests put there).
func (f *fixture) systemNamespace(t *testing.T, prefix string) string {
	t.Helper()
	namespaces := f.env.Kube.CoreV1().Namespaces()
	ns, err := namespaces.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := f.env.Kube.CoreV1().ConfigMaps(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("delete ConfigMaps of %s: %v", ns.Name, err)
		}
		if err := namespaces.Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
			return
		}
		cur, err := namespaces.Get(ctx, ns.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get namespace %s: %v", ns.Name, err)
			return
		}
		cur.Spec.Finalizers = nil
		if _, err := namespaces.Finalize(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("finalize namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// widgetCRD defines the namespaced kind Widget of a group unique to the
// test, served at v1; deleted at test end.
func (f *fixture) widgetCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	group := fmt.Sprintf("t%s.example.com", rand.String(6))
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: anySchema()},
			},
		},
	}
	crd, err := f.crds.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		api := f.crds.ApiextensionsV1().CustomResourceDefinitions()
		if err := api.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete CRD %s: %v", crd.Name, err)
			return
		}
		// Gone from discovery too: a later test's namespace clean-up lists
		// every resource discovery names.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, cleanupTimeout, true, func(ctx context.Context) (bool, error) {
			if _, err := api.Get(ctx, crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
			_, err := f.env.Kube.Discovery().ServerResourcesForGroupVersion(group + "/v1")
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("CRD %s still served: %v", crd.Name, err)
		}
	})
	return crd
}

func anySchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true),
	}}
}

// rss is the test binary's resident set in MiB, from /proc/self/status.
func rss(t *testing.T) float64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
