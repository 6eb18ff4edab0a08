package docgen

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-io/flotilla/internal/atomicfile"
	"github.com/google/go-cmp/cmp"
)

// update makes Check write sections instead of comparing them: `make docs`
// runs the TestReference tests with -update-docs.
var update = flag.Bool("update-docs", false, "rewrite the generated sections of docs/reference instead of comparing them (make docs)")

// Check compares section of page (a path from the module root, such as
// docs/reference/flags.md) with body, failing t with the difference and the
// way out (`make docs`) when they differ. With -update-docs it writes body
// into the section instead. The section holds body between blank lines.
func Check(t *testing.T, page, section, body string) {
	t.Helper()
	body = "\n" + strings.TrimRight(body, "\n") + "\n\n"
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, filepath.FromSlash(page))
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	current, err := Section(old, section)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if current == body {
		return
	}
	if !*update {
		t.Errorf("%s is stale: its generated section %q no longer matches its source; run `make docs` to regenerate it (-page, +source):\n%s",
			page, section, cmp.Diff(strings.Split(current, "\n"), strings.Split(body, "\n")))
		return
	}
	updated, err := Replace(old, section, body)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if err := writeFile(path, updated); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: section %q regenerated", page, section)
}

// Markers delimit a generated section.
func beginMarker(section string) string { return "<!-- BEGIN GENERATED: " + section + " -->\n" }
func endMarker(section string) string   { return "<!-- END GENERATED: " + section + " -->" }

// Section returns the text between section's markers in page.
func Section(page []byte, section string) (string, error) {
	start, end, err := bounds(page, section)
	if err != nil {
		return "", err
	}
	return string(page[start:end]), nil
}

// Replace returns page with the text between section's markers replaced
// by body.
func Replace(page []byte, section, body string) ([]byte, error) {
	start, end, err := bounds(page, section)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(page)-(end-start)+len(body))
	out = append(out, page[:start]...)
	out = append(out, body...)
	return append(out, page[end:]...), nil
}

// bounds finds the text between section's markers: after the begin
// marker's line, up to the end marker.
func bounds(page []byte, section string) (start, end int, err error) {
	begin, finish := []byte(beginMarker(section)), []byte(endMarker(section))
	if n := bytes.Count(page, begin); n != 1 {
		return 0, 0, fmt.Errorf("want one line %q, found %d", strings.TrimSpace(string(begin)), n)
	}
	if n := bytes.Count(page, finish); n != 1 {
		return 0, 0, fmt.Errorf("want one %q, found %d", finish, n)
	}
	start = bytes.Index(page, begin) + len(begin)
	end = bytes.Index(page, finish)
	if end < start {
		return 0, 0, fmt.Errorf("%q comes before %q", finish, strings.TrimSpace(string(begin)))
	}
	return start, end, nil
}

// moduleRoot is the nearest folder above the working directory (a test's
// package) that holds a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// writeFile replaces path's content whole, keeping its mode, so a failed
// write leaves the page as it was.
func writeFile(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, info.Mode().Perm())
}
