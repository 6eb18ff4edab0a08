package crds

import (
	"testing"

	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceKinds: docs/reference/api.md lists the kinds the hub
// serves and their printer columns as the embedded CRDs define them (make
// docs rewrites the sections).
func TestReferenceKinds(t *testing.T) {
	hub, err := Hub()
	if err != nil {
		t.Fatal(err)
	}
	docgen.Check(t, "docs/reference/api.md", "kinds", docgen.Kinds(hub))
	// Karmada's kinds copy the columns of Flotilla's.
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	docgen.Check(t, "docs/reference/api.md", "printer-columns", docgen.PrinterColumns(all))
}
