package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/flotilla-io/flotilla/internal/docgen"
)

// TestReferenceFlags: docs/reference/flags.md lists flotilla's global
// flags and each command's, as the FlagSets the commands parse define
// them (make docs rewrites the section).
func TestReferenceFlags(t *testing.T) {
	inv := (&App{}).newInvocation()
	var help, showVersion bool
	global := inv.globalFlags(&help)
	top := inv.topFlags(&help, &showVersion)
	first := pflag.NewFlagSet(programName, pflag.ContinueOnError)
	top.VisitAll(func(f *pflag.Flag) {
		if global.Lookup(f.Name) == nil {
			first.AddFlag(f)
		}
	})

	var b strings.Builder
	fmt.Fprintf(&b, "Global flags, before or after the command:\n\n%s\n", docgen.FlagTable(global))
	fmt.Fprintf(&b, "Before the command only:\n\n%s", docgen.FlagTable(first))
	for _, c := range commands() {
		local := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		c.bind(local)
		fmt.Fprintf(&b, "\n### %s %s\n\n`%s %s`: %s.\n\n", programName, c.name, programName, c.usage, c.short)
		if !local.HasFlags() {
			b.WriteString("No flags of its own.\n")
			continue
		}
		b.WriteString(docgen.FlagTable(local))
	}
	docgen.Check(t, "docs/reference/flags.md", "flotilla", b.String())
}
