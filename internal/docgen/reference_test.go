package docgen

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReferenceChartValues: docs/reference/chart-values.md lists the
// values of both charts as their values.yaml has them.
func TestReferenceChartValues(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, chart := range []string{"flotilla-hub", "flotilla-agent"} {
		values, err := os.ReadFile(filepath.Join(root, "charts", chart, "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		body, err := ChartValues(values)
		if err != nil {
			t.Fatalf("%s: %v", chart, err)
		}
		Check(t, "docs/reference/chart-values.md", chart, body)
	}
}
