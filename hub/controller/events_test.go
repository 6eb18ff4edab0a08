package controller

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestActionSeparatesMessagesAndFitsTheAPI(t *testing.T) {
	a, b := action("TaintAdded", "added taint x:NoSchedule"), action("TaintAdded", "added taint y:NoSchedule")
	if a == b {
		t.Errorf("different messages share the action %q: they would be counted as one event", a)
	}
	if a != action("TaintAdded", "added taint x:NoSchedule") {
		t.Error("the same message gave two actions: repeats would not be counted")
	}
	if len(a) > 128 {
		t.Errorf("action %q is longer than the API's 128 bytes", a)
	}
}

func TestTruncateKeepsRunesWhole(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{in: "short", n: 10, want: "short"},
		{in: strings.Repeat("a", 20), n: 10, want: strings.Repeat("a", 7) + "…"},
		{in: strings.Repeat("é", 10), n: 10, want: "ééé…"}, // é is 2 bytes, … is 3
	}
	for _, tt := range tests {
		got := truncate(tt.in, tt.n)
		if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q (at most %d bytes, valid UTF-8)", tt.in, tt.n, got, tt.want, tt.n)
		}
	}
}
