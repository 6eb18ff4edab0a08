package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository's root, seen from this package's folder.
const repoRoot = "../../.."

// TestDocsDiagramsAreCurrent renders every D2 source under docs/ and
// compares it with the SVG committed beside it.
func TestDocsDiagramsAreCurrent(t *testing.T) {
	var sources []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".d2") {
			sources = append(sources, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) == 0 {
		t.Fatal("no .d2 file under docs/: docs/architecture.d2 is expected")
	}
	for _, src := range sources {
		rel, err := filepath.Rel(repoRoot, src)
		if err != nil {
			t.Fatal(err)
		}
		svgRel := strings.TrimSuffix(rel, ".d2") + ".svg"
		t.Run(rel, func(t *testing.T) {
			got, err := renderFile(src, testLog{t})
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(repoRoot, svgRel))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what %s renders to; from test/tools/diagram run\n\tgo run . ../../../%s ../../../%s\nand commit both", svgRel, rel, rel, svgRel)
			}
		})
	}
}
