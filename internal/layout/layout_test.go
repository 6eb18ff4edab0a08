package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/flotilla-io/flotilla"

// cli are the packages of the flotilla CLI.
var cli = []string{"internal/cli", "cmd/flotilla", "cmd/kubectl-flotilla"}

// controllers are the hub's controllers, under hub/. A package that
// becomes a controller joins the list; one that is renamed or removed
// fails the test until the list follows.
var controllers = []string{
	"admission", "binding", "clusterdeletion", "detector", "dispatch", "failover", "join",
	"karmada", "purge", "rebalancer", "scheduling", "status", "templates",
}

// pkg is what the rules read of `go list -json`.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

// list runs `go list` on packages of the module (paths relative to its
// root). Test files are not part of a package's Deps: a test may wire
// several controllers together.
func list(t *testing.T, paths ...string) map[string]pkg {
	t.Helper()
	patterns := make([]string, len(paths))
	for i, p := range paths {
		patterns[i] = module + "/" + p
	}
	// go test puts the go command that runs it first in PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list packages: %v", err)
	}
	cmd := exec.Command(goTool, append([]string{"list", "-e", "-json=ImportPath,Imports,Deps,Error"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	for _, p := range paths {
		if _, ok := pkgs[p]; !ok {
			t.Fatalf("go list did not list %s", p)
		}
	}
	return pkgs
}

// dependency says how p reaches dep: an import of its own, or through
// other packages.
func dependency(p pkg, dep string) string {
	if slices.Contains(p.Imports, module+"/"+dep) {
		return "imports " + dep
	}
	return "depends on " + dep + " (through its imports)"
}

func TestCLIDependsOnNoHubPackage(t *testing.T) {
	pkgs := list(t, cli...)
	for _, path := range cli {
		p := pkgs[path]
		for _, dep := range p.Deps {
			rel, ok := strings.CutPrefix(dep, module+"/")
			if ok && (rel == "hub" || strings.HasPrefix(rel, "hub/")) {
				t.Errorf("%s %s: the CLI must not depend on the hub; move what both need to a package of its own (as internal/kube, internal/bootstraptoken)",
					path, dependency(p, rel))
			}
		}
	}
}

func TestControllersDependOnNoOtherController(t *testing.T) {
	paths := make([]string, len(controllers))
	for i, c := range controllers {
		paths[i] = "hub/" + c
	}
	pkgs := list(t, paths...)
	for _, path := range paths {
		p := pkgs[path]
		for _, other := range paths {
			if other != path && slices.Contains(p.Deps, module+"/"+other) {
				t.Errorf("%s %s: controllers must not depend on each other; move what they share to a package that is not a controller (as hub/names, hub/aggregate)",
					path, dependency(p, other))
			}
		}
	}
}
