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

// writeRaw prints the hub's JSON answer as it came, indented, or as YAML.
func writeRaw(w io.Writer, raw []byte, f outputFormat) error {
	var out []byte
	switch f {
	case outputJSON:
		var buf bytes.Buffer
		if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "    "); err != nil {
			return fmt.Errorf("indenting the hub's JSON: %w", err)
		}
		buf.WriteByte('\n')
		out = buf.Bytes()
	case outputYAML:
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return fmt.Errorf("converting the hub's JSON to YAML: %w", err)
		}
		out = y
	default:
		return fmt.Errorf("writeRaw: format %q is not raw", f)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}
