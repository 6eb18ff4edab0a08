package docgen

import (
	"strings"
)

// table is a Markdown table under construction.
type table struct {
	b strings.Builder
}

// newTable starts a table with a header row.
func newTable(header ...string) *table {
	t := &table{}
	t.row(header...)
	t.b.WriteString("|" + strings.Repeat("---|", len(header)) + "\n")
	return t
}

// row adds a row of cells, already Markdown.
func (t *table) row(cells ...string) {
	t.b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func (t *table) String() string { return t.b.String() }

// code is s as a code span in a table cell: the backticks it needs and
// its pipes escaped (GitHub ends a cell at a pipe even inside a span).
func code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + strings.ReplaceAll(s, "|", `\|`) + pad + fence
}

// text is prose from the code (a usage string, a help text, a comment) as
// a table cell or a paragraph: one line, with the characters Markdown or
// HTML would take for markup escaped outside its code spans.
func text(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	var b strings.Builder
	inCode := false
	for _, r := range s {
		switch {
		case r == '`':
			inCode = !inCode
			b.WriteRune(r)
		case r == '|':
			b.WriteString(`\|`)
		case inCode:
			b.WriteRune(r)
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '*' || r == '\\':
			b.WriteRune('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
