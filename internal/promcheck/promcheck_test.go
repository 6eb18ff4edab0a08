package promcheck

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProblems(t *testing.T) {
	tests := []struct {
		name       string
		exposition string
		want       []string // substrings, one per problem expected
	}{
		{"clean", `# HELP flotilla_renewals_total Renewals.
# TYPE flotilla_renewals_total counter
flotilla_renewals_total 3
# HELP flotilla_lease_age_seconds Age.
# TYPE flotilla_lease_age_seconds gauge
flotilla_lease_age_seconds{cluster="a"} 1.5
# HELP flotilla_delay_seconds Delay.
# TYPE flotilla_delay_seconds histogram
flotilla_delay_seconds_bucket{le="1"} 1
flotilla_delay_seconds_bucket{le="+Inf"} 1
flotilla_delay_seconds_sum 0.5
flotilla_delay_seconds_count 1
`, nil},
		{"counter without _total", "# HELP flotilla_renewals Renewals.\n# TYPE flotilla_renewals counter\nflotilla_renewals 3\n",
			[]string{`counter metrics should have "_total" suffix`, "counters, and only counters, end in _total"}},
		{"no help", "# TYPE flotilla_up gauge\nflotilla_up 1\n", []string{"no help text", "no help text"}},
		{"gauge named like a histogram series", "# HELP flotilla_things_count Things.\n# TYPE flotilla_things_count gauge\nflotilla_things_count 1\n",
			[]string{"histogram's _count series", `non-histogram and non-summary metrics should not have "_count" suffix`}},
		{"milliseconds", "# HELP flotilla_delay_milliseconds Delay.\n# TYPE flotilla_delay_milliseconds gauge\nflotilla_delay_milliseconds 1\n",
			[]string{"use base unit", "unit milliseconds: use seconds or bytes"}},
		{"camelCase", "# HELP flotilla_leaseAge Age.\n# TYPE flotilla_leaseAge gauge\nflotilla_leaseAge 1\n",
			[]string{"not snake_case", "camelCase"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Problems([]byte(tt.exposition))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tt.want), tt.want)
			}
			for _, w := range tt.want {
				found := false
				for _, p := range got {
					found = found || strings.Contains(p, w)
				}
				if !found {
					t.Errorf("no problem mentions %q among %q", w, got)
				}
			}
		})
	}
}

func FuzzProblems(f *testing.F) {
	f.Add([]byte("# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"))
	f.Add([]byte("a{b=\"c\"} 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Problems(b) // must not panic on any input
	})
}

func TestWithout(t *testing.T) {
	in := `# HELP eviction_kind_total Karmada's gauge.
# TYPE eviction_kind_total gauge
eviction_kind_total{member_cluster="a"} 1
# HELP eviction_kind_totals Another.
# TYPE eviction_kind_totals gauge
eviction_kind_totals 2
eviction_kind_total 3
`
	want := `# HELP eviction_kind_totals Another.
# TYPE eviction_kind_totals gauge
eviction_kind_totals 2
`
	if diff := cmp.Diff(want, string(Without([]byte(in), "eviction_kind_total"))); diff != "" {
		t.Errorf("Without (-want +got):\n%s", diff)
	}
}
