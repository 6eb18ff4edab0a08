package dashboard

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parsedEvent is one event as a browser's parser sees it.
type parsedEvent struct {
	Name, ID, Data string
}

// parseEvents follows the HTML event-stream rules the page's parser
// implements: lines end at \n, \r\n or \r; data lines join with \n.
func parseEvents(t *testing.T, stream []byte) []parsedEvent {
	t.Helper()
	stream = bytes.ReplaceAll(bytes.ReplaceAll(stream, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	var out []parsedEvent
	var cur parsedEvent
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				cur.Data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data = parsedEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Name = value
		case "id":
			cur.ID = value
		case "data":
			data = append(data, value)
		}
	}
	return out
}

func TestWriteEvent(t *testing.T) {
	tests := []struct {
		name string
		data string
		want string // the data the browser gets
	}{
		{"json", `{"now":1}`, `{"now":1}`},
		{"empty", ``, ``},
		{"newlines", "a\nb\n", "a\nb\n"},
		{"crlf and lone cr", "a\r\nb\rc", "a\nb\nc"},
		{"looks like a field", "x\nevent: evil\n\nid: 9", "x\nevent: evil\n\nid: 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeEvent(&b, "delta", 7, []byte(tt.data)); err != nil {
				t.Fatal(err)
			}
			got := parseEvents(t, b.Bytes())
			want := []parsedEvent{{Name: "delta", ID: "7", Data: tt.want}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("parsed (-want +got):\n%s\nstream: %q", diff, b.String())
			}
		})
	}
}

// FuzzWriteEvent: whatever the data, the stream holds exactly one event
// with that data (line ends normalised) and the given name.
func FuzzWriteEvent(f *testing.F) {
	f.Add([]byte(`{"clusters":[{"name":"a"}]}`))
	f.Add([]byte("\n\n\r\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b bytes.Buffer
		if err := writeEvent(&b, "snapshot", 1, data); err != nil {
			t.Fatal(err)
		}
		got := parseEvents(t, b.Bytes())
		norm := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
		if len(got) != 1 || got[0].Name != "snapshot" || got[0].Data != norm {
			t.Fatalf("data %q: parsed %+v", data, got)
		}
	})
}

func TestWriteJSONEvent(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSONEvent(&b, "delta", 3, Delta{Now: 5, RemovedClusters: []string{"line\nbreak"}}); err != nil {
		t.Fatal(err)
	}
	got := parseEvents(t, b.Bytes())
	want := []parsedEvent{{Name: "delta", ID: "3", Data: `{"now":5,"removedClusters":["line\nbreak"]}`}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
