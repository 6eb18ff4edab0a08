package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
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

// tableOptions says how "get" prints a table.
type tableOptions struct {
	single bool // the answer is one object, not a list
	wide   bool
	// across: the list spans namespaces (clusters, for works), so the rows
	// start with a column that says whose each is.
	across bool
	now    time.Time
}

// newTable starts a table with header, after first when the list spans
// namespaces.
func (o tableOptions) newTable(first string, header ...string) *table {
	if o.across {
		header = append([]string{first}, header...)
	}
	return &table{header: header}
}

// row is cells, after first when the list spans namespaces.
func (o tableOptions) row(first string, cells ...string) []string {
	if o.across {
		return append([]string{first}, cells...)
	}
	return cells
}

// decodeItems decodes the hub's answer: one object of kind when single,
// else a list of them.
func decodeItems[T any](raw []byte, single bool, kind string) ([]T, error) {
	if single {
		var obj T
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		return []T{obj}, nil
	}
	var list struct {
		Items []T `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("decoding %sList: %w", kind, err)
	}
	return list.Items, nil
}

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
