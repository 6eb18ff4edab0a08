package agent

import (
	"testing"

	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceMetrics: docs/reference/metrics.md lists the agent's metric
// families as its registry's collectors define them, every vector
// included (make docs rewrites the section). The Go runtime's and the
// process's families are their libraries' to document.
func TestReferenceMetrics(t *testing.T) {
	m := newMetrics()
	families, err := docgen.Families(m.collectors()...)
	if err != nil {
		t.Fatal(err)
	}
	table, err := docgen.MetricTable(docgen.Without(families, "go_", "process_"))
	if err != nil {
		t.Fatal(err)
	}
	docgen.Check(t, "docs/reference/metrics.md", "agent-metrics", table)
}
