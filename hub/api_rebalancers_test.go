package hub

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/hub/objects"
	"github.com/flotilla-io/flotilla/store"
)

func TestRebalancerEndpoints(t *testing.T) {
	s, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	api := &apiServer{objects: objects.New(s), logger: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(api.handler())
	t.Cleanup(srv.Close)

	send := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}
	const collection = "/apis/apps.flotilla.io/v1alpha1/workloadrebalancers"
	doc := `{"apiVersion":"apps.karmada.io/v1alpha1","kind":"WorkloadRebalancer","metadata":{"name":"demo"},
		"spec":{"workloads":[{"apiVersion":"apps/v1","kind":"Deployment","name":"nginx","namespace":"web"}],"ttlSecondsAfterFinished":300}}`

	code, body := send(http.MethodPost, collection, doc)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var created appsv1alpha1.WorkloadRebalancer
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	if created.APIVersion != appsv1alpha1.APIVersion || created.Generation != 1 || created.UID == "" || created.CreationTimestamp.IsZero() {
		t.Errorf("created %s generation %d uid %q created %v", created.APIVersion, created.Generation, created.UID, created.CreationTimestamp)
	}

	if code, body := send(http.MethodPost, collection, doc); code != http.StatusConflict || !strings.Contains(string(body), "AlreadyExists") {
		t.Errorf("create again: %d %s, want 409 AlreadyExists", code, body)
	}

	bad := strings.Replace(strings.Replace(doc, `"name":"nginx",`, "", 1), "300", "-5", 1)
	code, body = send(http.MethodPost, collection, bad)
	var status metav1.Status
	if err := json.Unmarshal(body, &status); err != nil || code != http.StatusUnprocessableEntity || status.Details == nil {
		t.Fatalf("invalid: %d %s", code, body)
	}
	var fields []string
	for _, c := range status.Details.Causes {
		fields = append(fields, c.Field)
	}
	if diff := cmp.Diff([]string{"spec.workloads[0].name", "spec.ttlSecondsAfterFinished"}, fields); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}

	if code, body := send(http.MethodPost, collection, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}`); code != http.StatusBadRequest {
		t.Errorf("a Deployment: %d %s, want 400", code, body)
	}

	code, body = send(http.MethodGet, collection, "")
	var list appsv1alpha1.WorkloadRebalancerList
	if err := json.Unmarshal(body, &list); err != nil || code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	if list.APIVersion != appsv1alpha1.APIVersion || list.Kind != "WorkloadRebalancerList" || len(list.Items) != 1 || list.Items[0].Name != "demo" {
		t.Errorf("list = %s %s with %d items", list.APIVersion, list.Kind, len(list.Items))
	}
	if code, body := send(http.MethodGet, collection+"/demo", ""); code != http.StatusOK || !strings.Contains(string(body), `"ttlSecondsAfterFinished":300`) {
		t.Errorf("get: %d %s", code, body)
	}
	if code, _ := send(http.MethodGet, collection+"/other", ""); code != http.StatusNotFound {
		t.Errorf("get a missing one: %d, want 404", code)
	}
}
