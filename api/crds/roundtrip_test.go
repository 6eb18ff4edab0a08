package crds_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/flotilla-io/flotilla/api/apps/v1alpha1"
	"github.com/flotilla-io/flotilla/api/internal/apitest"
	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// karmadaGroups are the groups of Karmada documents the hub takes as
// Flotilla's.
var karmadaGroups = map[string]string{
	"policy.karmada.io": v1alpha1.GroupName,
	"apps.karmada.io":   appsv1alpha1.GroupName,
}

// server serves every CRD as the API server would, by group and kind.
type server map[schema.GroupKind]served

func newServer(t *testing.T) server {
	t.Helper()
	byName := loadCRDs(t)
	s := server{}
	for _, k := range apitest.Kinds() {
		crd := byName[k.CRDName()]
		if crd == nil {
			t.Fatalf("no CRD %s", k.CRDName())
		}
		s[k.GVK.GroupKind()] = serve(t, crd)
	}
	return s
}

// admit admits obj with the CRD of its kind.
func (s server) admit(t *testing.T, obj map[string]any) admission {
	t.Helper()
	u := unstructured.Unstructured{Object: obj}
	crd, ok := s[u.GroupVersionKind().GroupKind()]
	if !ok {
		t.Fatalf("no CRD serves %s", u.GroupVersionKind())
	}
	return crd.admit(obj)
}

// toUnstructured is obj as the API server decodes it from JSON.
func toUnstructured(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("marshal %T: %v", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("unmarshal %T: %v\n%s", obj, err, raw)
	}
	return u.Object
}

type roundTripCase struct {
	name string
	obj  map[string]any
}

// goCases are objects built in Go: one with every field set per kind, and
// the shapes of objects.go.
func goCases(t *testing.T) []roundTripCase {
	t.Helper()
	var cases []roundTripCase
	for _, k := range apitest.Kinds() {
		cases = append(cases, roundTripCase{"filled " + k.GVK.Kind, toUnstructured(t, k.Filled())})
	}
	for _, c := range []struct {
		name string
		obj  runtime.Object
	}{
		{"cluster registered", clusterRegistered()}, {"cluster ready", clusterReady()},
		{"policy", propagationPolicy()}, {"cluster policy", clusterPropagationPolicy()}, {"minimal cluster policy", minimalPolicy()},
		{"binding detected", bindingDetected()}, {"binding scheduled", bindingScheduled()}, {"binding unschedulable", bindingUnschedulable()},
		{"cluster binding", clusterResourceBinding()},
		{"work created", workCreated()}, {"work applied", workApplied()}, {"work tombstone", workTombstone()},
		{"rebalancer new", rebalancerNew()}, {"rebalancer finished", rebalancerFinished()}, {"rebalancer retrying", rebalancerRetrying()},
	} {
		cases = append(cases, roundTripCase{c.name, toUnstructured(t, c.obj)})
	}
	return cases
}

// fixtureCases are the documents of testdata/, with Karmada's groups
// taken as Flotilla's, as the hub takes them.
func fixtureCases(t *testing.T) []roundTripCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata (%v)", err)
	}
	var cases []roundTripCase
	for _, file := range files {
		for i, doc := range readDocuments(t, file) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(doc); err != nil {
				t.Fatalf("%s document %d: %v", file, i+1, err)
			}
			gvk := u.GroupVersionKind()
			if group, ok := karmadaGroups[gvk.Group]; ok {
				gvk.Group = group
				u.SetGroupVersionKind(gvk)
			}
			cases = append(cases, roundTripCase{name: fmt.Sprintf("%s#%d %s", filepath.Base(file), i+1, u.GetName()), obj: u.Object})
		}
	}
	return cases
}

// readDocuments returns the YAML documents of a file as JSON.
func readDocuments(t *testing.T, file string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs = append(docs, js)
	}
}

func stripComments(doc []byte) []byte {
	var out []string
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, ""))
}

// TestObjectsSurviveTheAPIServer: every object the code builds, and every
// document of the tests, is accepted by its CRD and stored exactly as
// sent: no field pruned, no null dropped, nothing required that the code
// leaves out.
func TestObjectsSurviveTheAPIServer(t *testing.T) {
	s := newServer(t)
	for _, tc := range append(goCases(t), fixtureCases(t)...) {
		t.Run(tc.name, func(t *testing.T) {
			got := s.admit(t, tc.obj)
			if len(got.dropped) > 0 {
				t.Errorf("pruned unknown fields: %v", got.dropped)
			}
			if len(got.errs) > 0 {
				t.Errorf("refused: %v", got.errs.ToAggregate())
			}
			if diff := cmp.Diff(tc.obj, got.stored); diff != "" {
				t.Errorf("stored object differs (-sent +stored):\n%s", diff)
			}
		})
	}
}

// TestAdmitCatchesProblems shows that the admission of the round-trip test
// sees what it is there to see.
func TestAdmitCatchesProblems(t *testing.T) {
	s := newServer(t)
	tests := []struct {
		name        string
		obj         runtime.Object
		change      func(obj map[string]any)
		wantDropped []string
		wantErr     string
	}{
		{"unknown spec field", clusterReady(), func(obj map[string]any) {
			obj["spec"].(map[string]any)["futureField"] = true
		}, []string{"spec.futureField"}, ""},
		{"unknown status field", workApplied(), func(obj map[string]any) {
			obj["status"].(map[string]any)["futureField"] = map[string]any{"a": int64(1)}
		}, []string{"status.futureField"}, ""},
		{"missing required field", bindingScheduled(), func(obj map[string]any) {
			delete(obj["spec"].(map[string]any), "resource")
		}, nil, "spec.resource: Required value"},
		{"null required list", minimalPolicy(), func(obj map[string]any) {
			obj["spec"].(map[string]any)["resourceSelectors"] = nil
		}, nil, "spec.resourceSelectors: Required value"},
		{"condition without reason", clusterReady(), func(obj map[string]any) {
			conds := obj["status"].(map[string]any)["conditions"].([]any)
			conds[0].(map[string]any)["reason"] = ""
		}, nil, "status.conditions[0].reason"},
		{"duplicate condition type", workApplied(), func(obj map[string]any) {
			status := obj["status"].(map[string]any)
			conds := status["conditions"].([]any)
			status["conditions"] = append(conds, runtime.DeepCopyJSONValue(conds[0]))
		}, nil, "status.conditions[2]: Duplicate value"},
		{"rebalancer without workloads", rebalancerNew(), func(obj map[string]any) {
			obj["spec"].(map[string]any)["workloads"] = []any{}
		}, nil, "spec.workloads: Invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := toUnstructured(t, tc.obj)
			tc.change(obj)
			got := s.admit(t, obj)
			if diff := cmp.Diff(tc.wantDropped, got.dropped, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pruned fields (-want +got):\n%s", diff)
			}
			errText := ""
			if err := got.errs.ToAggregate(); err != nil {
				errText = err.Error()
			}
			if tc.wantErr == "" && errText != "" || !strings.Contains(errText, tc.wantErr) {
				t.Errorf("errors %q, want one containing %q", errText, tc.wantErr)
			}
		})
	}
}
