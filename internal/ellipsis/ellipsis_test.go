package ellipsis

import "testing"

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"much too long", 10, "much to..."},
		{"ääääää", 8, "ää..."}, // never cuts a character in half
	} {
		if got := Cut(tc.in, tc.limit); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}
