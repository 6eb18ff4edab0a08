package membercluster

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const testStages = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  next:
    statusTemplate: |
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  delay:
    durationMilliseconds: 20000
    jitterDurationMilliseconds: 25000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions: []
  immediateNextStage: true
`

func TestWithHeartbeatEvery(t *testing.T) {
	out, err := withHeartbeatEvery([]byte(testStages), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	docs := splitStages(t, string(out))
	if len(docs) != 2 {
		t.Fatalf("got %d stages, want 2:\n%s", len(docs), out)
	}
	want := splitStages(t, testStages)
	want[1]["spec"].(map[string]any)["delay"] = map[string]any{"durationMilliseconds": float64(150000), "jitterDurationMilliseconds": float64(450000)}
	if diff := cmp.Diff(want, docs); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
}

func TestWithHeartbeatEveryRefuses(t *testing.T) {
	for name, stages := range map[string]string{
		"no heartbeat stage": strings.SplitAfter(testStages, "phase: Running\n")[0],
		"not YAML":           "---\nmetadata: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if out, err := withHeartbeatEvery([]byte(stages), time.Minute); err == nil {
				t.Errorf("got no error, and:\n%s", out)
			}
		})
	}
}

// splitStages parses a stage document set.
func splitStages(t *testing.T, stages string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for doc := range strings.SplitSeq(stages, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimLeft(doc, "\n"), "---\n") + "\n"
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m)
	}
	return docs
}
