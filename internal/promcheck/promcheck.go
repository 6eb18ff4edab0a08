// Package promcheck checks a Prometheus text exposition the way `promtool
// check metrics` does (client_golang's promlint, the linter promtool runs),
// plus the conventions Flotilla holds its own metrics to: help on every
// family, snake_case names, counters ending in _total, no _count, _sum or
// _bucket suffix outside histograms and summaries, and base units.
package promcheck

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// nonBaseUnits are unit words a metric name must not use: Prometheus wants
// seconds and bytes.
var nonBaseUnits = []string{"_milliseconds", "_microseconds", "_nanoseconds", "_minutes", "_hours", "_days", "_kilobytes", "_megabytes", "_gigabytes", "_ms"}

// Parse reads a text exposition into its families, by name.
func Parse(exposition []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return nil, fmt.Errorf("parse the exposition: %w", err)
	}
	return families, nil
}

// Problems lists what promtool's linter and Flotilla's conventions find
// wrong with the exposition, one line each.
func Problems(exposition []byte) ([]string, error) {
	families, err := Parse(exposition)
	if err != nil {
		return nil, err
	}
	lint, err := promlint.New(bytes.NewReader(exposition)).Lint()
	if err != nil {
		return nil, fmt.Errorf("lint: %w", err)
	}
	var out []string
	for _, p := range lint {
		out = append(out, p.Metric+": "+p.Text)
	}
	for name, mf := range families {
		out = append(out, conventions(name, mf)...)
	}
	return out, nil
}

func conventions(name string, mf *dto.MetricFamily) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, name+": "+fmt.Sprintf(format, args...)) }
	if strings.TrimSpace(mf.GetHelp()) == "" {
		bad("no help text")
	}
	if !snakeCase.MatchString(name) {
		bad("not snake_case")
	}
	isCounter := mf.GetType() == dto.MetricType_COUNTER
	if isCounter != strings.HasSuffix(name, "_total") {
		bad("type %s: counters, and only counters, end in _total", mf.GetType())
	}
	if mf.GetType() != dto.MetricType_HISTOGRAM && mf.GetType() != dto.MetricType_SUMMARY {
		for _, suffix := range []string{"_count", "_sum", "_bucket"} {
			if strings.HasSuffix(name, suffix) {
				bad("a %s named like a histogram's %s series", mf.GetType(), suffix)
			}
		}
	}
	for _, unit := range nonBaseUnits {
		if strings.Contains(name+"_", unit+"_") {
			bad("unit %s: use seconds or bytes", strings.TrimPrefix(unit, "_"))
		}
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if !snakeCase.MatchString(l.GetName()) {
				bad("label %q not snake_case", l.GetName())
			}
		}
	}
	return out
}

// Without returns the exposition without the counters and gauges named
// (a histogram's series carry suffixes and are not matched): for names
// another project chose that the conventions would reject (Karmada's
// eviction_kind_total is a gauge), kept as they are so that dashboards
// written for that project work.
func Without(exposition []byte, names ...string) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(exposition) {
		if !ofFamily(string(line), names) {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// ofFamily reports whether an exposition line (a sample, or its HELP or
// TYPE comment) belongs to one of the families named.
func ofFamily(line string, names []string) bool {
	if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
		line = rest
	} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
		line = rest
	}
	end := strings.IndexAny(line, "{ \n")
	if end < 0 {
		end = len(line)
	}
	for _, n := range names {
		if line[:end] == n {
			return true
		}
	}
	return false
}
