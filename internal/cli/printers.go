package cli

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Placeholders for what an object does not carry: none for a single value,
// noneList for an empty list (as kubectl prints them).
const (
	none     = "-"
	noneList = "<none>"
)

// newTabWriter aligns columns the way kubectl's printers do.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}

// table is rows of cells under a header.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write prints the table in aligned columns.
func (t *table) write(w io.Writer) error { return t.writeIndented(w, "") }

// writeIndented prints the table in aligned columns, each line after
// indent and without trailing blanks (an empty last cell leaves none).
func (t *table) writeIndented(w io.Writer, indent string) error {
	var buf bytes.Buffer
	tw := newTabWriter(&buf)
	for _, r := range append([][]string{t.header}, t.rows...) {
		fmt.Fprintf(tw, "%s%s\n", indent, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("aligning table: %w", err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			out.WriteString(strings.TrimRight(line, " \n") + "\n")
		}
	}
	if _, err := io.WriteString(w, out.String()); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

// orNone is s, or "-" when s is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// oneLine keeps a free-text cell from breaking the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
