package docgen

import "testing"

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"two\n  lines", "two lines"},
		{"a|b", `a\|b`},
		{"<fullname>-cert", "&lt;fullname&gt;-cert"},
		{"`kubectl get <name>`", "`kubectl get <name>`"},
		{"`a|b`", "`a\\|b`"},
		{`hub-0:7443\,hub-1:7443`, `hub-0:7443\\,hub-1:7443`},
		{"2 * 3", `2 \* 3`},
		{"flotilla_build_info", "flotilla_build_info"},
	}
	for _, tt := range tests {
		if got := text(tt.in); got != tt.want {
			t.Errorf("text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"--flag", "`--flag`"},
		{`""`, "`\"\"`"},
		{"a|b", "`a\\|b`"},
		{"`x`", "`` `x` ``"},
	}
	for _, tt := range tests {
		if got := code(tt.in); got != tt.want {
			t.Errorf("code(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
