package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-io/flotilla/internal/promcheck"
)

// promQuery is a PromQL expression and the samples it must give.
type promQuery struct {
	Expr       string       `json:"expr"`
	EvalTime   string       `json:"eval_time"`
	ExpSamples []promSample `json:"exp_samples"`
}

// promSample is one sample a query gives: its labels as PromQL prints
// them ({name="binding-eviction"}) and its value.
type promSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// checkPromQL runs the queries with the real promtool (`promtool test
// rules`) over the families named, as scraped from a hub: what a dashboard
// or an alert written for those names would see.
func checkPromQL(t *testing.T, exposition string, families []string, queries []promQuery) {
	t.Helper()
	parsed, err := promcheck.Parse([]byte(exposition))
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	var input []series
	for _, name := range families {
		mf, ok := parsed[name]
		if !ok {
			t.Fatalf("the hub's /metrics has no %s", name)
		}
		for _, s := range promSeries(mf) {
			input = append(input, series{Series: s.name, Values: fmt.Sprintf("%g %g", s.value, s.value)})
		}
	}
	for i := range queries {
		queries[i].EvalTime = "1m"
	}
	test := map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": "1m",
		"tests":               []any{map[string]any{"interval": "1m", "input_series": input, "promql_expr_test": queries}},
	}
	data, err := yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{"rules.yaml": []byte("groups: []\n"), "test.yaml": data} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(testbinTool(t, "promtool"), "test", "rules", "test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules over the hub's %s: %v\n%s\ninput:\n%s", strings.Join(families, ", "), err, out, data)
	}
}

type sample struct {
	name  string
	value float64
}

// promSeries are a family's series as PromQL names them (a histogram's
// as its _bucket, _sum and _count series).
func promSeries(mf *dto.MetricFamily) []sample {
	var out []sample
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		name := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			out = append(out, sample{seriesName(name, labels), m.GetCounter().GetValue()})
		case dto.MetricType_GAUGE:
			out = append(out, sample{seriesName(name, labels), m.GetGauge().GetValue()})
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				out = append(out, sample{seriesName(name+"_bucket", with(labels, "le", fmt.Sprintf("%g", b.GetUpperBound()))), float64(b.GetCumulativeCount())})
			}
			out = append(out, sample{seriesName(name+"_bucket", with(labels, "le", "+Inf")), float64(h.GetSampleCount())},
				sample{seriesName(name+"_sum", labels), h.GetSampleSum()}, sample{seriesName(name+"_count", labels), float64(h.GetSampleCount())})
		}
	}
	return out
}

func with(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range labels {
		out[lk] = lv
	}
	return out
}

func seriesName(name string, labels map[string]string) string {
	var pairs []string
	for k, v := range labels {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}
