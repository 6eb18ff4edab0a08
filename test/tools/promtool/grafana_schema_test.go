package promtool

import (
	"errors"
	"os"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	grafana "github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// TestGrafanaDashboardSchema decodes the chart's dashboard with the types
// generated from Grafana's own dashboard and panel schemas, strictly: an
// unknown field, a wrong type or a missing required field (what Grafana
// would fill in on import) fails, and so does the schema's validation.
func TestGrafanaDashboardSchema(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins() // panel options and queries by type
	var d grafana.Dashboard
	if err := schemaErrors(d.UnmarshalJSONStrict(raw)); err != nil {
		t.Fatalf("%s against Grafana's dashboard schema:\n%v", dashboardFile, err)
	}
	if err := schemaErrors(d.Validate()); err != nil {
		t.Errorf("%s: Grafana's schema validation:\n%v", dashboardFile, err)
	}
	if len(d.Panels) == 0 {
		t.Errorf("%s: no panels decoded", dashboardFile)
	}
}

// schemaErrors drops the empty error list the SDK returns when all is well.
func schemaErrors(err error) error {
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		return nil
	}
	return err
}
