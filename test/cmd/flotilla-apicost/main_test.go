package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    runOptions
		wantErr bool
	}{
		{name: "defaults", args: nil, want: runOptions{testbin: ".testbin",
			servers: []serverKind{crdJSON, builtinJSON, builtinCBOR, crdCBOR}, objects: 3000, clients: 16, repeat: 2, idle: 3 * time.Second}},
		{name: "some servers", args: []string{"--servers", "builtin, crd", "--objects", "10"}, want: runOptions{testbin: ".testbin",
			servers: []serverKind{builtinJSON, crdJSON}, objects: 10, clients: 16, repeat: 2, idle: 3 * time.Second}},
		{name: "unknown server", args: []string{"--servers", "protobuf"}, wantErr: true},
		{name: "no clients", args: []string{"--clients", "0"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FLOTILLA_TESTBIN", "")
			got, err := parseFlags(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q) error %v, want error %v", tt.args, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(runOptions{})); diff != "" {
				t.Errorf("parseFlags(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// The server-side-apply type converter finds a kind only by the
// group-version-kind extension of its OpenAPI definition: without it the
// generic server writes no managedFields, and a write costs less than it
// would in earnest.
func TestDefinitionsCarryKinds(t *testing.T) {
	scheme, err := builtinScheme()
	if err != nil {
		t.Fatal(err)
	}
	getDefs, err := openAPIDefinitions()
	if err != nil {
		t.Fatal(err)
	}
	name, err := withKinds(scheme, apiopenapi.NewDefinitionNamer(scheme).GetDefinitionName)
	if err != nil {
		t.Fatal(err)
	}
	defs := getDefs(func(path string) spec.Ref { return spec.MustCreateRef("#/" + path) })
	for _, obj := range []any{&v1alpha1.ResourceBinding{}, &v1alpha1.ResourceBindingList{}} {
		key := defName(obj)
		if _, ok := defs[key]; !ok {
			t.Errorf("no definition %s", key)
		}
		got, ext := name(key)
		if got != key {
			t.Errorf("definition name of %s = %s, want it unchanged", key, got)
		}
		if _, ok := ext["x-kubernetes-group-version-kind"]; !ok {
			t.Errorf("definition %s has no group-version-kind extension: %v", key, ext)
		}
	}
}
