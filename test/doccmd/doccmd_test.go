package doccmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const page = "# Title\n" + // 1
	"\n" + // 2
	"## Start\n" + // 3
	"Run `make demo` and, from another terminal, `bin/flotilla get\n" + // 4
	"  clusters -o wide`.\n" + // 5
	"\n" + // 6
	"```sh\n" + // 7
	"make demo   # watch it\n" + // 8
	"flotilla token create --cluster edge-1 \\\n" + // 9
	"    --description \"store 7\" --set 'a=b' --set x=a\\,b\n" + // 10
	"# token abc created\n" + // 11
	"#\n" + // 12
	"#     helm install x\n" + // 13
	"\n" + // 14
	"# a note on its own\n" + // 15
	"kubectl get cluster edge-1   # on the hub\n" + // 16
	"```\n" + // 17
	"\n" + // 18
	"```yaml\n" + // 19
	"# not a heading\n" + // 20
	"kind: Pod\n" + // 21
	"```\n" + // 22
	"### Deeper\n" + // 23
	"```sh\n" + // 24
	"make test\n" + // 25
	"```\n" + // 26
	"## Next\n" + // 27
	"```sh\n" + // 28
	"make other\n" + // 29
	"```\n"

func TestSection(t *testing.T) {
	s, err := FindSection(page, "Start")
	if err != nil {
		t.Fatal(err)
	}
	if s.Line != 3 {
		t.Errorf("heading line %d, want 3", s.Line)
	}
	blocks := s.Blocks("sh")
	var got []Command
	for _, b := range blocks {
		cmds, err := b.Commands()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cmds...)
	}
	want := []Command{
		{Args: []string{"make", "demo"}, Comment: "watch it", Line: 8},
		{Args: []string{"flotilla", "token", "create", "--cluster", "edge-1", "--description", "store 7", "--set", "a=b", "--set", "x=a,b"},
			Output: []string{"token abc created", "", "    helm install x"}, Line: 9},
		{Args: []string{"kubectl", "get", "cluster", "edge-1"}, Comment: "on the hub", Line: 16},
		{Args: []string{"make", "test"}, Line: 25},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"make demo", "bin/flotilla get clusters -o wide"}, s.InlineCode()); diff != "" {
		t.Errorf("inline code (-want +got):\n%s", diff)
	}
	if _, err := FindSection(page, "not a heading"); err == nil {
		t.Error("a comment line inside a fenced block was taken for a heading")
	}
}

func TestCommandsRefuseWhatIsNotCopyable(t *testing.T) {
	tests := map[string]string{
		"variable":     "echo $HOME\n",
		"quoted var":   "echo \"$HOME\"\n",
		"pipe":         "make test | tee log\n",
		"redirect":     "make test > log\n",
		"substitution": "echo $(date)\n",
		"assignment":   "X=1 make\n",
		"syntax":       "echo 'open\n",
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Block{Lang: "sh", Line: 40, Text: text}.Commands()
			if err == nil || !strings.Contains(err.Error(), "line 40") {
				t.Errorf("error %v, want one naming line 40", err)
			}
		})
	}
}

func TestCalls(t *testing.T) {
	script := "#!/bin/bash\nset -e\nif true; then\n  make test 2>&1 | tee \"$log\"\nfi\n"
	got, err := Calls("run", []byte(script))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"set", "-e"}, {"true"}, {"make", "test"}, {"tee", `"$log"`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
