package workload

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestReplicasOf(t *testing.T) {
	tests := []struct {
		doc  string
		want int32
	}{
		{"apiVersion: apps/v1\nkind: Deployment\nspec: {replicas: 4}", 4},
		{"apiVersion: apps/v1\nkind: StatefulSet\nspec: {}", 1},
		{"apiVersion: batch/v1\nkind: Job\nspec: {parallelism: 2, completions: 10}", 2},
		{"apiVersion: v1\nkind: ConfigMap\ndata: {replicas: \"3\"}", 0},
		{"apiVersion: example.com/v1\nkind: Deployment\nspec: {replicas: 4}", 0},
	}
	for _, tt := range tests {
		u := &unstructured.Unstructured{}
		j, err := yaml.YAMLToJSON([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatal(err)
		}
		if got := Replicas(u); got != tt.want {
			t.Errorf("Replicas(%s) = %d, want %d", tt.doc, got, tt.want)
		}
	}
}
