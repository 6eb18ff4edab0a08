package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// outputFormat is the value of -o/--output.
type outputFormat string

const (
	outputTable outputFormat = ""
	outputWide  outputFormat = "wide"
	outputJSON  outputFormat = "json"
	outputYAML  outputFormat = "yaml"
)

// parseOutput checks the value of -o.
func parseOutput(s string) (outputFormat, error) {
	switch f := outputFormat(s); f {
	case outputTable, outputWide, outputJSON, outputYAML:
		return f, nil
	}
	return "", fmt.Errorf("invalid --output %q: must be one of wide, json, yaml (or none, for a table)", s)
}

// writeRaw prints the hub's JSON answer, indented, or as YAML, without
// metadata.managedFields (of the object, or of every item of a list), as
// kubectl prints objects. Every other field stays, those flotilla does not
// know included; keys come out sorted.
func writeRaw(w io.Writer, raw []byte, f outputFormat) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj any
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("decoding the hub's JSON: %w", err)
	}
	dropManagedFields(obj)
	var out []byte
	switch f {
	case outputJSON:
		data, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		out = append(data, '\n')
	case outputYAML:
		data, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		out = data
	default:
		return fmt.Errorf("writeRaw: format %q is not raw", f)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// dropManagedFields removes metadata.managedFields from an object and
// from the items of a list.
func dropManagedFields(obj any) {
	m, ok := obj.(map[string]any)
	if !ok {
		return
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	if items, ok := m["items"].([]any); ok {
		for _, item := range items {
			dropManagedFields(item)
		}
	}
}
