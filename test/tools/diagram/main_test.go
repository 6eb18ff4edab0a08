package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderIsDeterministic renders the same source twice in one process;
// TestDocsDiagramsAreCurrent checks it across processes.
func TestRenderIsDeterministic(t *testing.T) {
	const src = "direction: right\na: one -> b: two: label\nb -> c: {class: x}\nclasses: {x: {style.stroke: red}}\n"
	first, err := render("small.d2", []byte(src), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	second, err := render("small.d2", []byte(src), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two renders of the same source differ")
	}
	if !bytes.HasPrefix(first, []byte("<?xml")) || !bytes.Contains(first, []byte("<svg")) {
		t.Errorf("not an SVG: %.100q", first)
	}
	if bytes.Contains(first, []byte("data-d2-version")) {
		t.Error("the SVG names D2's version, which the library reports wrongly")
	}
}

func TestRunWritesTheSVG(t *testing.T) {
	dir := t.TempDir()
	src, out := filepath.Join(dir, "in.d2"), filepath.Join(dir, "out.svg")
	if err := os.WriteFile(src, []byte("x -> y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{src, out}, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderFile(src, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the written SVG differs from the rendered one")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("files left in the output folder: %v, want in.d2 and out.svg", entries)
	}
}

// TestBadInputIsNamed: errors name the file and line at fault, and leave
// the old output in place.
func TestBadInputIsNamed(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.svg")
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, src, want string }{
		{"syntax", "a -> b\nc: {\n", "broken.d2:2:"},
		{"layout engine", "vars: {d2-config: {layout-engine: tala}}\na -> b\n", `layout engine "tala"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(dir, "broken.d2")
			if err := os.WriteFile(src, []byte(tc.src), 0o644); err != nil {
				t.Fatal(err)
			}
			err := run([]string{src, out}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if old, _ := os.ReadFile(out); string(old) != "old" {
				t.Errorf("output changed to %.40q on a failed render", old)
			}
		})
	}
	if err := run([]string{"only-one.d2"}, io.Discard); err == nil {
		t.Error("one argument accepted, want SOURCE.d2 and OUT.svg")
	}
}

// testLog sends D2's warnings to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
