// Package docgen writes the generated sections of the pages in
// docs/reference from the code itself: the binaries' pflag FlagSets, the
// hub's and the agent's Prometheus collectors, the CRDs and the charts'
// values.yaml.
//
// A page keeps its hand-written prose; each generated section sits between
// the markers
//
//	<!-- BEGIN GENERATED: NAME -->
//	<!-- END GENERATED: NAME -->
//
// Each package that owns a source of truth has a TestReference test that
// renders its sections with this package and calls Check: the test fails,
// naming the page and `make docs`, when a section differs from what the
// code gives, and with -update-docs (what `make docs` passes) it rewrites
// the section instead.
//
// Only tests import this package.
package docgen
