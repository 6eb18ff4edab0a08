package main

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-io/flotilla/internal/promcheck"
)

// TestWritesPerBinding: the table is the difference of two scrapes of the
// hub's counters divided by the bindings, a row per kind that changed.
func TestWritesPerBinding(t *testing.T) {
	scrape := func(t *testing.T, text string) writeSnapshot {
		t.Helper()
		families, err := promcheck.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return snapshotFrom(families)
	}
	before := scrape(t, `# TYPE flotilla_api_writes_total counter
flotilla_api_writes_total{resource="leases",subresource="",verb="update"} 40
flotilla_api_writes_total{resource="resourcebindings",subresource="",verb="create"} 3
flotilla_api_writes_total{resource="clusters",subresource="status",verb="update"} 9
`)
	after := scrape(t, `# TYPE flotilla_api_writes_total counter
flotilla_api_writes_total{resource="leases",subresource="",verb="update"} 60
flotilla_api_writes_total{resource="resourcebindings",subresource="",verb="create"} 203
flotilla_api_writes_total{resource="resourcebindings",subresource="status",verb="update"} 350
flotilla_api_writes_total{resource="works",subresource="",verb="create"} 600
flotilla_api_writes_total{resource="clusters",subresource="status",verb="update"} 9
# TYPE flotilla_api_write_conflicts_total counter
flotilla_api_write_conflicts_total{resource="resourcebindings",subresource="status",verb="update"} 7
`)
	got := writePhase{before: before, after: after}.table(200, "binding")
	want := `| resource | subresource | verb | writes | per binding | conflicts |
|---|---|---|---:|---:|---:|
| leases |  | update | 20 | 0.10 | 0 |
| resourcebindings |  | create | 200 | 1.00 | 0 |
| resourcebindings | status | update | 350 | 1.75 | 7 |
| works |  | create | 600 | 3.00 | 0 |
| **total** | | | 1170 | **5.85** | 7 |
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	// No evictions: no ratio to give.
	if got, want := (writePhase{before: before, after: before}).table(0, "eviction"), "| **total** | | | 0 | **n/a** | 0 |\n"; got[len(got)-len(want):] != want {
		t.Errorf("table of an empty phase ends %q, want %q", got, want)
	}
	if got := (writePhase{err: errors.New("no metrics")}).table(200, "binding"); got != "no metrics\n" {
		t.Errorf("table of an unread phase = %q, want the error", got)
	}
}
