package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// writeEvent writes one server-sent event: an event name, an id and the
// data, one "data:" line per line of it (the browser joins them with
// newlines). name must be a single line.
func writeEvent(w io.Writer, name string, id uint64, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(data) + len(name) + 32)
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteString("\nid: ")
	b.WriteString(strconv.FormatUint(id, 10))
	b.WriteByte('\n')
	// A browser ends a line at \r\n, \n or a lone \r.
	data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// writeJSONEvent encodes v as the event's data.
func writeJSONEvent(w io.Writer, name string, id uint64, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", name, err)
	}
	return writeEvent(w, name, id, data)
}
