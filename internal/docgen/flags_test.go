package docgen

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestFlagTable(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.StringP("output", "o", "", "output `FORMAT`: wide | json (default a table)")
	fs.Duration("timeout", 10*time.Second, "time limit, 0 for <none>")
	fs.StringSlice("tls-san", nil, "extra names")
	fs.Bool("secret", false, "not shown")
	if err := fs.MarkHidden("secret"); err != nil {
		t.Fatal(err)
	}
	fs.Int("old", 1, "an old flag")
	if err := fs.MarkDeprecated("old", "use --new"); err != nil {
		t.Fatal(err)
	}
	want := "| flag | type | default | meaning |\n" +
		"|---|---|---|---|\n" +
		"| `-o`, `--output` | string | `\"\"` | output FORMAT: wide \\| json (default a table) |\n" +
		"| `--timeout` | duration | `10s` | time limit, 0 for &lt;none&gt; |\n" +
		"| `--tls-san` | stringSlice | `[]` | extra names |\n"
	if diff := cmp.Diff(want, FlagTable(fs)); diff != "" {
		t.Errorf("FlagTable (-want +got):\n%s", diff)
	}
}
