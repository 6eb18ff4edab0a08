package docgen

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// ChartValues renders a chart's values.yaml: the comment at its top as a
// paragraph, then a Markdown table of its values, in the file's order:
// each value's key path, its default as YAML, and the comment above its
// key (and after it on the line). A map with values of its own gets a row
// when it has a comment, and rows for its values; a list or an empty map
// is one value.
func ChartValues(values []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errors.New("values.yaml: want a map at the top")
	}
	var b strings.Builder
	if intro := comment(doc.HeadComment); intro != "" {
		b.WriteString(text(intro) + "\n\n")
	}
	t := newTable("value", "default", "meaning")
	valueRows(t, "", doc.Content[0])
	b.WriteString(t.String())
	return b.String(), nil
}

// valueRows adds the rows of the values of m, whose path is prefix.
func valueRows(t *table, prefix string, m *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		note := comment(key.HeadComment, key.LineComment, value.LineComment)
		if value.Kind == yaml.MappingNode && len(value.Content) > 0 {
			if note != "" {
				t.row(code(path), "", text(note))
			}
			valueRows(t, path+".", value)
			continue
		}
		t.row(code(path), code(flow(value)), text(note))
	}
}

// comment joins YAML comments into one line of text without the #s.
func comment(comments ...string) string {
	var words []string
	for _, c := range comments {
		for _, line := range strings.Split(c, "\n") {
			line = strings.TrimSpace(line)
			line = strings.TrimSpace(strings.TrimLeft(line, "#"))
			if line != "" {
				words = append(words, line)
			}
		}
	}
	return strings.Join(words, " ")
}

// flow writes n on one line, in YAML's flow style.
func flow(n *yaml.Node) string {
	switch n.Kind {
	case yaml.AliasNode:
		return flow(n.Alias)
	case yaml.SequenceNode:
		items := make([]string, len(n.Content))
		for i, c := range n.Content {
			items[i] = flow(c)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case yaml.MappingNode:
		pairs := make([]string, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			pairs = append(pairs, flow(n.Content[i])+": "+flow(n.Content[i+1]))
		}
		return "{" + strings.Join(pairs, ", ") + "}"
	}
	// A scalar as written, but quoted when it was (an empty string, "1"
	// as a string...) or spans lines.
	if strings.Contains(n.Value, "\n") {
		return strconv.Quote(n.Value)
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || n.Value == "" {
		out, err := yaml.Marshal(n.Value)
		if err == nil {
			s := strings.TrimSuffix(string(out), "\n")
			if !strings.HasPrefix(s, `"`) && !strings.HasPrefix(s, "'") {
				s = `"` + s + `"`
			}
			return s
		}
	}
	return n.Value
}
