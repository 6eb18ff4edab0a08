package work

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	deployRef = objectRef{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: "demo", Name: "web"}
	cmRef     = objectRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "demo", Name: "conf"}
	nsRef     = objectRef{Version: "v1", Kind: "Namespace", Resource: "namespaces", Name: "demo"}
	crdRef    = objectRef{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition",
		Resource: "customresourcedefinitions", Name: "widgets.example.com"}
)

func TestObjectRefString(t *testing.T) {
	for ref, want := range map[objectRef]string{
		deployRef: "apps/v1 Deployment demo/web",
		cmRef:     "v1 ConfigMap demo/conf",
		nsRef:     "v1 Namespace demo",
	} {
		if got := ref.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func TestRefSets(t *testing.T) {
	// The same object read through another version is the same object.
	oldDeploy := deployRef
	oldDeploy.Version = "v1beta1"
	if diff := cmp.Diff([]objectRef{cmRef}, subtract([]objectRef{deployRef, cmRef}, []objectRef{oldDeploy})); diff != "" {
		t.Errorf("subtract (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]objectRef{oldDeploy, cmRef}, union([]objectRef{oldDeploy}, []objectRef{deployRef, cmRef})); diff != "" {
		t.Errorf("union (-want +got):\n%s", diff)
	}
}

func TestDeleteOrder(t *testing.T) {
	got := deleteOrder([]objectRef{nsRef, crdRef, deployRef, cmRef})
	want := []objectRef{deployRef, cmRef, crdRef, nsRef}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delete order (-want +got):\n%s", diff)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []*record{
		{Generation: 3, Binding: "default/web", Objects: []objectRef{nsRef, deployRef}},
		{Generation: 0, Binding: "web", Pending: []objectRef{cmRef}},
		{Generation: 7, Objects: []objectRef{deployRef}, Pending: []objectRef{crdRef}},
		{Generation: 2, Objects: []objectRef{deployRef}, StatePaths: []string{"{.jobStatus.jobId}", `{.a["b c"]}`}},
	} {
		data, err := r.data()
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseRecord(data)
		if err != nil {
			t.Fatalf("parse %v: %v", data, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("record after a round trip (-want +got):\n%s", diff)
		}
	}
}

func TestParseRecordRejectsDamage(t *testing.T) {
	for name, data := range map[string]map[string]string{
		"no generation":       {keyBinding: "b"},
		"negative generation": {keyGeneration: "-1"},
		"bad objects":         {keyGeneration: "1", keyObjects: "[{"},
		"bad pending":         {keyGeneration: "1", keyPending: "{}"},
		"bad state paths":     {keyGeneration: "1", keyStatePaths: `{"a":1}`},
	} {
		if r, err := parseRecord(data); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, r)
		}
	}
}
