package main

import (
	"testing"

	"github.com/flotilla-io/flotilla/agent"
	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceFlags: docs/reference/flags.md lists flotilla-agent's flags
// as its FlagSet defines them (make docs rewrites the section).
func TestReferenceFlags(t *testing.T) {
	var cfg agent.Config
	var o options
	docgen.Check(t, "docs/reference/flags.md", "flotilla-agent", docgen.FlagTable(newFlags(&cfg, &o)))
}
