package work

import (
	"encoding/json"
	"testing"

	"github.com/flotilla-io/flotilla/protocol"
)

// Manifests the tests apply.

func deployment(name, namespace, image string, replicas int) map[string]any {
	labels := map[string]any{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
			},
		},
	}
}

func configMap(name, namespace string, data map[string]any) map[string]any {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
}

func job(name, namespace string) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy": "Never",
				"containers":    []any{map[string]any{"name": "task", "image": "busybox"}},
			}},
		},
	}
}

func widgetCRD() map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}
}

func widget(name, namespace string) map[string]any {
	return map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"size": 3},
	}
}

// upsert builds a WorkUpsert; the protocol's own checks must pass.
func upsert(t *testing.T, name string, gen int64, manifests ...map[string]any) *protocol.WorkUpsert {
	t.Helper()
	u := &protocol.WorkUpsert{Name: name, Generation: gen, Binding: "default/" + name}
	for _, m := range manifests {
		u.Manifests = append(u.Manifests, json.RawMessage(raw(t, m)))
	}
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
	return u
}
