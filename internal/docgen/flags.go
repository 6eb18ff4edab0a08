package docgen

import (
	"github.com/spf13/pflag"
)

// FlagTable renders the flags of fs, in the order its usage lists them,
// as a Markdown table: the flag and its shorthand, its type, its default
// and its usage string. Hidden flags (deprecated ones among them) are
// left out.
func FlagTable(fs *pflag.FlagSet) string {
	t := newTable("flag", "type", "default", "meaning")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := code("--" + f.Name)
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			name = code("-"+f.Shorthand) + ", " + name
		}
		_, usage := pflag.UnquoteUsage(f)
		t.row(name, f.Value.Type(), defaultValue(f.DefValue), text(usage))
	})
	return t.String()
}

// defaultValue shows a flag's default as the flag would take it; an empty
// one as "".
func defaultValue(v string) string {
	if v == "" {
		return code(`""`)
	}
	return code(v)
}
