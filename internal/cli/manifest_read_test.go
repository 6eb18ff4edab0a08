package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// inDir writes files (path: content) under a new directory and makes it
// the working directory, so that messages name the paths as given.
func inDir(t *testing.T, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
}

// appliedItems returns "apiVersion kind name" of every object flotilla
// sent to the hub to apply (or dry-run), in order.
func appliedItems(t *testing.T, h *testHub) []string {
	t.Helper()
	_, bodies := h.sentMatching(http.MethodPatch, "/")
	items := make([]string, len(bodies))
	for i, body := range bodies {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatalf("apply body is not JSON: %v\n%s", err, body)
		}
		items[i] = fmt.Sprintf("%s %s %s", obj.APIVersion, obj.Kind, obj.Metadata.Name)
	}
	return items
}

// configMap is a YAML document of a ConfigMap.
func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

const nginxYAML = `# the shop's web tier
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
# only a comment
---   # an empty document
apiVersion: v1
kind: ConfigMap
metadata:
  name: nginx-conf
  namespace: shop
data:
  a: b
---
`

const listYAML = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: one
- apiVersion: v1
  kind: Secret
  metadata:
    name: two
---
apiVersion: flotilla.io/v1alpha1
kind: PropagationPolicyList
items:
- metadata:
    name: from-get
  spec:
    resourceSelectors: []
`

const tabbedJSON = "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"ConfigMap\",\n\t\"metadata\": {\"name\": \"tabbed\"}\n}\n"

const jsonStream = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"}}
{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "second"}}]}
`

func TestApplyReadsDocuments(t *testing.T) {
	manifests := map[string]string{
		"manifests/b.yaml":      configMap("b"),
		"manifests/a.yml":       configMap("a"),
		"manifests/c.json":      tabbedJSON,
		"manifests/README.md":   "not a manifest",
		"manifests/sub/d.yaml":  configMap("d"),
		"manifests/sub/e.txt":   "not a manifest",
		"manifests/sub/x/f.YML": configMap("f"),
	}
	tests := []struct {
		name      string
		files     map[string]string
		stdin     string
		args      []string
		wantItems []string
	}{
		{
			name: "documents of a file, empty ones skipped", files: map[string]string{"nginx.yaml": nginxYAML},
			args: []string{"-f", "nginx.yaml"}, wantItems: []string{"apps/v1 Deployment nginx", "v1 ConfigMap nginx-conf"},
		},
		{
			name: "a directory: its manifest files sorted", files: manifests,
			args: []string{"-f", "manifests"}, wantItems: []string{"v1 ConfigMap a", "v1 ConfigMap b", "v1 ConfigMap tabbed"},
		},
		{
			name: "a directory tree", files: manifests, args: []string{"-R", "-f", "manifests/"},
			wantItems: []string{"v1 ConfigMap a", "v1 ConfigMap b", "v1 ConfigMap tabbed", "v1 ConfigMap d", "v1 ConfigMap f"},
		},
		{
			name: "standard input", stdin: nginxYAML,
			args: []string{"-f", "-"}, wantItems: []string{"apps/v1 Deployment nginx", "v1 ConfigMap nginx-conf"},
		},
		{
			name: "lists expanded, typed lists fill in their items' kind", files: map[string]string{"list.yaml": listYAML},
			args:      []string{"-f", "list.yaml"},
			wantItems: []string{"v1 ConfigMap one", "v1 Secret two", "flotilla.io/v1alpha1 PropagationPolicy from-get"},
		},
		{
			name: "JSON: indented with tabs, and a stream", files: map[string]string{"a.json": tabbedJSON, "b.json": jsonStream},
			args: []string{"-f", "a.json", "-f", "b.json"}, wantItems: []string{"v1 ConfigMap tabbed", "v1 ConfigMap first", "v1 ConfigMap second"},
		},
		{
			name: "several -f, with commas, and stdin", files: map[string]string{"a.yaml": configMap("a"), "b.yaml": configMap("b")},
			stdin: configMap("c"), args: []string{"-f", "b.yaml,a.yaml", "-f", "-"},
			wantItems: []string{"v1 ConfigMap b", "v1 ConfigMap a", "v1 ConfigMap c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inDir(t, tt.files)
			h := newHub(t)
			ns := h.Namespace(t)
			r := h.runStdin(t, tt.stdin, append([]string{"apply", "--dry-run", "-n", ns}, tt.args...)...)
			wantExit(t, r, 0)
			if diff := cmp.Diff(tt.wantItems, appliedItems(t, h)); diff != "" {
				t.Errorf("items sent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyLocalProblems(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		args  []string
		want  string
	}{
		{
			name:  "YAML syntax, line counted in the file",
			files: map[string]string{"bad.yaml": configMap("ok") + "---\n" + configMap("broken") + "  labels:\n    a: [b\n"},
			args:  []string{"-f", "bad.yaml"},
			want: `error: 1 problem in the input; nothing was sent to the hub:
  bad.yaml: document 2: invalid YAML: line 11: did not find expected ',' or ']'
`,
		},
		{
			name:  "a key given twice",
			files: map[string]string{"dup.yaml": "\n\n" + configMap("dup") + "  name: dup2\n"},
			args:  []string{"-f", "dup.yaml"},
			want: `error: 1 problem in the input; nothing was sent to the hub:
  dup.yaml: document 1: invalid YAML: line 7: key "name" already set in map
`,
		},
		{
			name:  "not objects",
			files: map[string]string{"list.yaml": "- a\n- b\n---\njust text\n---\n42\n"},
			args:  []string{"-f", "list.yaml"},
			want: `error: 3 problems in the input; nothing was sent to the hub:
  list.yaml: document 1: must be an object with apiVersion, kind and metadata, not a list
  list.yaml: document 2: must be an object with apiVersion, kind and metadata, not a string
  list.yaml: document 3: must be an object with apiVersion, kind and metadata, not a number
`,
		},
		{
			name: "missing and mistyped fields",
			files: map[string]string{"fields.yaml": "kind: ConfigMap\nmetadata: {}\n---\napiVersion: 3\nkind: ''\nmetadata: x\n" +
				"---\napiVersion: v1\nkind: Secret\nmetadata:\n  namespace: shop\n  name: null\n"},
			args: []string{"-f", "fields.yaml"},
			want: `error: 6 problems in the input; nothing was sent to the hub:
  fields.yaml: document 1 (ConfigMap): apiVersion: Required value
  fields.yaml: document 1 (ConfigMap): metadata.name: Required value
  fields.yaml: document 2: apiVersion: Invalid value: 3: must be a string
  fields.yaml: document 2: kind: Required value
  fields.yaml: document 2: metadata: Invalid value: "x": must be an object
  fields.yaml: document 3 (Secret): metadata.name: Required value
`,
		},
		{
			name: "lists",
			files: map[string]string{"lists.yaml": "apiVersion: v1\nkind: List\nitems:\n- x\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {}\n" +
				"- apiVersion: v1\n  kind: List\n  metadata:\n    name: inner\n  items: []\n---\napiVersion: v1\nkind: List\n"},
			args: []string{"-f", "lists.yaml"},
			want: `error: 4 problems in the input; nothing was sent to the hub:
  lists.yaml: document 1, item 1: must be an object with apiVersion, kind and metadata, not a string
  lists.yaml: document 1, item 2 (ConfigMap): metadata.name: Required value
  lists.yaml: document 1, item 3: a List inside a List is not supported
  lists.yaml: document 2 (List): items: Required value
`,
		},
		{
			name:  "JSON syntax",
			files: map[string]string{"bad.json": "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\"\n  \"metadata\": {}\n}\n"},
			args:  []string{"-f", "bad.json"},
			want: `error: 1 problem in the input; nothing was sent to the hub:
  bad.json: document 1: invalid JSON: line 4: invalid character '"' after object key:value pair
`,
		},
		{
			name: "every problem of every file, good files too",
			files: map[string]string{
				"a.yaml": configMap("fine"), "b.yaml": "kind: Secret\nmetadata:\n  name: s\n",
				"c.yaml": configMap("fine-too") + "---\nkind: Secret\nmetadata:\n\tname: s\n",
			},
			args: []string{"-f", "a.yaml,b.yaml", "-f", "c.yaml"},
			want: `error: 2 problems in the input; nothing was sent to the hub:
  b.yaml: document 1 (Secret s): apiVersion: Required value
  c.yaml: document 2: invalid YAML: line 8: found character that cannot start any token
`,
		},
		{
			name:  "nothing to apply",
			files: map[string]string{"empty.yaml": "# nothing yet\n---\n", "none.json": "  \n"},
			args:  []string{"-f", "empty.yaml", "-f", "none.json"},
			want:  "error: no objects in empty.yaml, none.json\n",
		},
		{
			name:  "a directory without manifests",
			files: map[string]string{"dir/README.md": "x", "dir/sub/a.yaml": configMap("a")},
			args:  []string{"-f", "dir"},
			want:  "error: directory dir has no .yaml, .yml, .json files (add -R to read its subdirectories)\n",
		},
		{
			name: "a missing file",
			args: []string{"-f", "missing.yaml"},
			want: "error: cannot read missing.yaml: no such file or directory\n",
		},
	}
	h := newHub(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inDir(t, tt.files)
			r := h.run(t, append([]string{"apply"}, tt.args...)...)
			wantExit(t, r, 1)
			if diff := cmp.Diff(tt.want, r.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if sent := h.sent(); len(sent) != 0 || r.stdout != "" {
				t.Errorf("sent %q and printed %q; want neither", sent, r.stdout)
			}
		})
	}
}
