package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// origin is where an object of the input came from, for messages.
type origin struct {
	source string // file name or stdinName
	doc    int    // 1-based among the source's non-empty documents
	item   int    // 1-based index in a List document; 0 for a plain document
}

func (o origin) String() string {
	s := fmt.Sprintf("%s: document %d", o.source, o.doc)
	if o.item > 0 {
		s += fmt.Sprintf(", item %d", o.item)
	}
	return s
}

// document is one non-empty document of a source, converted to JSON.
type document struct {
	origin origin
	json   []byte
}

// problem is one thing wrong with the input: where (file, document, kind
// and name, as far as known) and what.
type problem struct {
	where string // empty when the hub named no item
	what  string
}

func (p problem) String() string {
	if p.where == "" {
		return p.what
	}
	return p.where + ": " + p.what
}

// parseDocuments splits a source into documents. Input that starts like
// JSON is a stream of JSON values (as "kubectl get -o json" writes them);
// anything else is YAML documents separated by "---" lines. Empty documents
// (only blanks and comments, or null) are skipped and not counted.
func parseDocuments(s source) ([]document, []problem) {
	data := bytes.TrimPrefix(s.data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return jsonDocuments(s.name, data)
	}
	return yamlDocuments(s.name, data)
}

// jsonDocuments decodes a stream of JSON values. A syntax error ends the
// stream: nothing after it can be trusted to start a value.
func jsonDocuments(name string, data []byte) ([]document, []problem) {
	var docs []document
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		start := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		o := origin{source: name, doc: n}
		if err != nil {
			return docs, []problem{{where: o.String(), what: "invalid JSON: " + jsonErrorText(data, start, err)}}
		}
		if string(raw) == "null" {
			n--
			continue
		}
		docs = append(docs, document{origin: o, json: raw})
	}
}

// jsonErrorText adds the line of a syntax error to its message.
func jsonErrorText(data []byte, start int64, err error) string {
	offset := int64(len(data)) // an unexpected end is at the end
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || se != nil {
		offset = min(max(offset, start), int64(len(data)))
		return fmt.Sprintf("line %d: %v", 1+bytes.Count(data[:offset], []byte("\n")), err)
	}
	return err.Error()
}

// yamlDocuments splits data at "---" lines and converts each document to
// JSON. Keys given twice in one mapping are an error, as in kubectl: the
// second would silently win.
func yamlDocuments(name string, data []byte) ([]document, []problem) {
	var (
		docs     []document
		problems []problem
		n        int
	)
	lines := strings.SplitAfter(string(data), "\n")
	start := 0 // index of the current document's first line
	flush := func(end int) {
		chunk := lines[start:end]
		first := start + 1 // the document's first line in the file, 1-based
		start = end + 1
		if isBlankYAML(chunk) {
			return
		}
		n++
		o := origin{source: name, doc: n}
		out, err := yaml.YAMLToJSONStrict([]byte(strings.Join(chunk, "")))
		if err != nil {
			for _, msg := range yamlErrorTexts(err, first) {
				problems = append(problems, problem{where: o.String(), what: "invalid YAML: " + msg})
			}
			return
		}
		if string(out) != "null" {
			docs = append(docs, document{origin: o, json: out})
		}
	}
	for i, line := range lines {
		if isDocumentSeparator(line) {
			flush(i)
		}
	}
	flush(len(lines))
	return docs, problems
}

// isDocumentSeparator matches "---", optionally followed by blanks and a
// comment, the separators kubectl accepts.
func isDocumentSeparator(line string) bool {
	rest, ok := strings.CutPrefix(line, "---")
	if !ok {
		return false
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, "#")
}

func isBlankYAML(lines []string) bool {
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// yamlLine finds the line numbers the YAML library puts in its messages.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlErrorTexts turns the YAML library's error into one message per
// problem, with line numbers counted from the start of the file rather than
// of the document (first is the document's first line).
func yamlErrorTexts(err error, first int) []string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	parts := []string{msg}
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok {
		parts = strings.Split(rest, "\n")
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if m := yamlLine.FindStringSubmatch(p); m != nil {
			if line, err := strconv.Atoi(m[1]); err == nil {
				p = fmt.Sprintf("line %d: %s", first+line-1, p[len(m[0]):])
			}
		}
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
