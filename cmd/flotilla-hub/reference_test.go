package main

import (
	"testing"

	"github.com/flotilla-io/flotilla/hub"
	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceFlags: docs/reference/flags.md lists the flags of
// flotilla-hub and of its kubeconfig and certs issue commands as their
// FlagSets define them (make docs rewrites the sections).
func TestReferenceFlags(t *testing.T) {
	const page = "docs/reference/flags.md"
	var cfg hub.Config
	var serve serveOptions
	// --hub-id's default is the host's name: the page names it so.
	docgen.Check(t, page, "flotilla-hub", docgen.FlagTable(newFlags(&cfg, &serve, "<hostname>")))
	var dataDir, server string
	docgen.Check(t, page, "flotilla-hub-kubeconfig", docgen.FlagTable(newKubeconfigFlags(&dataDir, &server)))
	var issue issueOptions
	docgen.Check(t, page, "flotilla-hub-certs-issue", docgen.FlagTable(newIssueFlags(&issue)))
}
