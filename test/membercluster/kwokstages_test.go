package membercluster

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

// splitStages parses a stage document set with a decoder of its own
// (not the reader withHeartbeatEvery splits with).
func splitStages(t *testing.T, stages string) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stages), 4096)
	var docs []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
}

// The stages as KWOK's own files write them: a comment after a separator,
// a block scalar that keeps its trailing newlines, CRLF line ends.
func TestWithHeartbeatEveryKeepsOtherDocuments(t *testing.T) {
	stages := "--- # first\nkind: Stage\nmetadata: {name: keep}\nspec:\n  text: |+\n    a\n\n---\r\nkind: Stage\r\nmetadata: {name: node-heartbeat}\r\nspec: {}\r\n"
	out, err := withHeartbeatEvery([]byte(stages), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	docs := splitStages(t, string(out))
	if len(docs) != 2 || strings.Count(string(out), "---") != 2 {
		t.Fatalf("got %d stages, want 2, each after one separator:\n%s", len(docs), out)
	}
	if got := docs[0]["spec"].(map[string]any)["text"]; got != "a\n\n" {
		t.Errorf("the first stage's kept block scalar: got %q, want %q", got, "a\n\n")
	}
	want := map[string]any{"durationMilliseconds": float64(1000), "jitterDurationMilliseconds": float64(3000)}
	if diff := cmp.Diff(want, docs[1]["spec"].(map[string]any)["delay"]); diff != "" {
		t.Errorf("heartbeat delay (-want +got):\n%s", diff)
	}
}
