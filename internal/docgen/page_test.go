package docgen

import (
	"strings"
	"testing"
)

func TestSectionAndReplace(t *testing.T) {
	page := "# Title\n\n<!-- BEGIN GENERATED: a -->\nold\n<!-- END GENERATED: a -->\n\nprose\n"
	got, err := Section([]byte(page), "a")
	if err != nil || got != "old\n" {
		t.Errorf("Section = %q, %v, want %q", got, err, "old\n")
	}
	out, err := Replace([]byte(page), "a", "new\nlines\n")
	want := "# Title\n\n<!-- BEGIN GENERATED: a -->\nnew\nlines\n<!-- END GENERATED: a -->\n\nprose\n"
	if err != nil || string(out) != want {
		t.Errorf("Replace = %q, %v, want %q", out, err, want)
	}

	bad := []struct{ name, page, want string }{
		{"no markers", "# Title\n", "found 0"},
		{"no end", "<!-- BEGIN GENERATED: a -->\nx\n", "found 0"},
		{"twice", page + page, "found 2"},
		{"end first", "<!-- END GENERATED: a -->\n<!-- BEGIN GENERATED: a -->\n", "comes before"},
		{"other section", strings.ReplaceAll(page, ": a ", ": b "), "found 0"},
	}
	for _, tt := range bad {
		if _, err := Section([]byte(tt.page), "a"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Section error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
}
